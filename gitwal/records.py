"""Record types and their canonical encoding: the only place records become bytes.

A record is one JSON object, encoded with sorted keys, no insignificant white
space, UTF-8. Every record carries ``v`` (format version) and ``type``; a
reader refuses a version it does not know instead of guessing. docs/format.md
is the normative description of these fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import CorruptLog
from .ids import ABSENT, Lsn, RunId, is_object_id

FORMAT_VERSION = 1
REPLAY_SAFE = "safe"
REPLAY_UNSAFE = "unsafe"


@dataclass(frozen=True)
class Plan:
    """LSN 1 of every run: what the run is for and where it started."""

    run: RunId
    lsn: Lsn
    task: str
    base: str  # commit id of HEAD when the run began
    branch: str | None  # None when HEAD was detached
    steps: tuple[str, ...] = ()
    # The worktree the run started in and is bound to: (name, path). name is
    # the linked worktree's name under <common dir>/worktrees/, "" for the
    # main one. None: a log written before runs were bound (encoded only when set).
    worktree: tuple[str, str] | None = None


@dataclass(frozen=True)
class Intent:
    """A step about to change the working tree; durable before the change."""

    run: RunId
    lsn: Lsn
    tool: str
    args: dict[str, Any]
    target: tuple[str, ...]  # paths, relative to the work tree ("." for exec)
    pre: tuple[str, ...]  # per target: object id or ABSENT (exec: one tree id)
    post: tuple[str, ...] | None  # per target; None when not known in advance
    mode: tuple[int, ...]  # per target: git file mode of the pre-image, 0 if absent
    replay: str
    key: str  # idempotency key "<run>:<lsn>"
    check: str | None = None
    step: int | None = None  # the plan step (1-based) this intent carries out


@dataclass(frozen=True)
class Commit:
    """Closes an intent: the effect landed and was verified."""

    run: RunId
    lsn: Lsn
    intent: Lsn
    post: tuple[str, ...]  # observed post state (exec: the post tree id)
    verified: str
    recovered: bool = False


@dataclass(frozen=True)
class Abort:
    """Closes an intent that did not land, failed verification, or was abandoned."""

    run: RunId
    lsn: Lsn
    intent: Lsn
    reason: str
    restored: tuple[str, ...] = ()  # paths put back to their pre-image
    output: str = ""  # tail of a failed check's output


@dataclass(frozen=True)
class Checkpoint:
    """The working tree as of ``covers`` is an ordinary git commit.

    Readers that need the current state start here: nothing before it is
    needed for recovery, so the records before it may be archived.
    """

    run: RunId
    lsn: Lsn
    git: str  # the checkpoint commit
    tree: str  # its tree (kept reachable by the log itself)
    ref: str  # where the commit lives: the branch, or refs/wal-checkpoints/<run>/<lsn>
    covers: int  # LSN of the last committed intent it includes (0: none)
    plan: str  # blob id of the run's plan record, so readers need not walk to LSN 1
    committed: int  # committed intents in the run up to here
    done_steps: tuple[int, ...] = ()  # plan steps carried out up to here
    unlogged: tuple[str, ...] = ()  # paths included that no step explains


@dataclass(frozen=True)
class Unlogged:
    """The tree changed without a durable intent (a hook that timed out or
    failed open, an edit made before the hooks were installed): recorded when
    noticed, so the log has no silent gap. It closes nothing and explains the
    change only as "seen", never as verified."""

    run: RunId
    lsn: Lsn
    paths: tuple[str, ...]  # paths whose state differs from the log's expectation
    expected: tuple[str, ...]  # per path: what the log expected (object id or ABSENT)
    observed: tuple[str, ...]  # per path: what was found (kept alive by the append)
    noticed: str  # who noticed, e.g. "claude-code PreToolUse Edit"


@dataclass(frozen=True)
class Seal:
    """The run's last record, signed: a log whose tail was cut is not sealed.

    ``last`` and ``head`` name the record and the append commit sealed, ``tree``
    the working tree then; nothing may be appended after a seal."""

    run: RunId
    lsn: Lsn
    last: int  # LSN of the record before the seal (== lsn - 1)
    head: str  # commit id of the append that holds ``last``
    tree: str  # tree id of the working tree when the run was sealed


Record = Plan | Intent | Commit | Abort | Checkpoint | Unlogged | Seal
_TYPES: dict[str, type[Record]] = {
    "plan": Plan,
    "intent": Intent,
    "commit": Commit,
    "abort": Abort,
    "checkpoint": Checkpoint,
    "unlogged": Unlogged,
    "seal": Seal,
}
_NAMES = {cls: name for name, cls in _TYPES.items()}


def type_name(record: Record) -> str:
    return _NAMES[type(record)]


def to_dict(record: Record) -> dict[str, Any]:
    """The record as plain data, with ``v`` and ``type``; lists for tuples."""
    out: dict[str, Any] = {"v": FORMAT_VERSION, "type": type_name(record)}
    for name in record.__dataclass_fields__:
        value = getattr(record, name)
        out[name] = list(value) if isinstance(value, tuple) else value
    if isinstance(record, Plan):
        # Absent, not null, when unset: older plans stay byte-identical.
        wt = out.pop("worktree")
        if wt is not None:
            out["worktree"] = {"name": wt[0], "path": wt[1]}
    return out


def encode(record: Record) -> bytes:
    """Canonical bytes: the same record always encodes to the same blob."""
    return json.dumps(
        to_dict(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def decode(data: bytes, where: str) -> Record:
    """Parse and validate one record blob; ``where`` names it in errors."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _corrupt(where, f"not valid UTF-8 JSON ({e})") from None
    if not isinstance(raw, dict):
        raise _corrupt(where, "not a JSON object")
    version = raw.get("v")
    if type(version) is not int or version != FORMAT_VERSION:
        raise CorruptLog(
            f"{where}: record format version {version!r} is not supported "
            f"(this gitwal reads version {FORMAT_VERSION})",
            "upgrade gitwal to read this log, or check that the ref holds a gitwal log",
        )
    kind = raw.get("type")
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise _corrupt(where, f"unknown record type {raw.get('type')!r}")
    fields = cls.__dataclass_fields__
    body = {k: v for k, v in raw.items() if k not in ("v", "type")}
    unknown = set(body) - set(fields)
    if unknown:
        raise _corrupt(where, f"unknown fields {sorted(unknown)}")
    try:
        record = _build(cls, body)
    except (TypeError, ValueError) as e:
        raise _corrupt(where, str(e)) from None
    return record


def _build(cls: type[Record], body: dict[str, Any]) -> Record:
    def req(name: str, kind: type | tuple[type, ...]) -> Any:
        return _req(body, name, kind)

    def ids(name: str, allow_absent: bool = True) -> tuple[str, ...]:
        return _ids(body, name, allow_absent)

    run = RunId(req("run", str))
    lsn = Lsn(req("lsn", int))
    if lsn < 1:
        raise ValueError("lsn must be positive")
    if cls is Plan:
        steps = req("steps", list)
        if not all(isinstance(s, str) for s in steps):
            raise ValueError("steps must be strings")
        branch = req("branch", (str, type(None)))
        if branch is not None and not isinstance(branch, str):
            raise ValueError("branch must be a string or null")
        base = req("base", str)
        if not is_object_id(base):
            raise ValueError("base is not a commit id")
        worktree = None
        if "worktree" in body:
            wt = req("worktree", dict)
            if set(wt) != {"name", "path"} or not all(isinstance(v, str) for v in wt.values()):
                raise ValueError("worktree must be an object with string name and path")
            worktree = (wt["name"], wt["path"])
        return Plan(run, lsn, req("task", str), base, branch, tuple(steps), worktree)
    if cls is Intent:
        target = tuple(req("target", list))
        if not target or not all(isinstance(t, str) for t in target):
            raise ValueError("target must be a non-empty list of paths")
        tool = req("tool", str)
        pre = ids("pre")
        req("post", (list, type(None)))
        post = None if body["post"] is None else ids("post")
        if (post is None) != (tool == "exec"):
            raise ValueError("post must be null for exec and a list for every other tool")
        mode = tuple(req("mode", list))
        if not all(type(m) is int for m in mode):
            raise ValueError("mode must be integers")
        if len(pre) != len(target) or len(mode) != len(target):
            raise ValueError("pre and mode must have one entry per target")
        if post is not None and len(post) != len(target):
            raise ValueError("post must have one entry per target")
        replay = req("replay", str)
        if replay not in (REPLAY_SAFE, REPLAY_UNSAFE):
            raise ValueError(f"replay must be {REPLAY_SAFE!r} or {REPLAY_UNSAFE!r}")
        check = body.get("check")
        if check is not None and not isinstance(check, str):
            raise ValueError("check must be a string or null")
        step = body.get("step")
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            raise ValueError("step must be an integer or null")
        return Intent(
            run, lsn, tool, req("args", dict), target, pre, post, mode,
            replay, req("key", str), check, step,
        )
    if cls is Commit:
        recovered = body.get("recovered", False)
        if not isinstance(recovered, bool):
            raise ValueError("recovered must be a boolean")
        return Commit(
            run, lsn, Lsn(req("intent", int)), ids("post"), req("verified", str), recovered
        )
    if cls is Checkpoint:
        git, tree, plan_blob = req("git", str), req("tree", str), req("plan", str)
        if not all(is_object_id(x) for x in (git, tree, plan_blob)):
            raise ValueError("git, tree and plan must be object ids")
        done = req("done_steps", list)
        unlogged = req("unlogged", list)
        if not all(type(n) is int for n in done) or not all(
            isinstance(p, str) for p in unlogged
        ):
            raise ValueError("done_steps must be integers and unlogged paths")
        covers, committed = req("covers", int), req("committed", int)
        return Checkpoint(
            run, lsn, git, tree, req("ref", str), covers, plan_blob, committed,
            tuple(done), tuple(unlogged),
        )
    if cls is Unlogged:
        paths = req("paths", list)
        if not paths or not all(isinstance(p, str) for p in paths):
            raise ValueError("paths must be a non-empty list of paths")
        expected, observed = ids("expected"), ids("observed")
        if len(expected) != len(paths) or len(observed) != len(paths):
            raise ValueError("expected and observed must have one entry per path")
        return Unlogged(run, lsn, tuple(paths), expected, observed, req("noticed", str))
    if cls is Seal:
        last, head, tree = req("last", int), req("head", str), req("tree", str)
        if last != lsn - 1:
            raise ValueError("last must be the LSN just before the seal")
        if not (is_object_id(head) and is_object_id(tree)):
            raise ValueError("head and tree must be object ids")
        return Seal(run, lsn, last, head, tree)
    restored = req("restored", list)
    if not all(isinstance(p, str) for p in restored):
        raise ValueError("restored must be paths")
    return Abort(
        run, lsn, Lsn(req("intent", int)), req("reason", str), tuple(restored),
        req("output", str),
    )


def _req(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    try:
        value = body[name]
    except KeyError:
        raise ValueError(f"missing field {name!r}") from None
    if not isinstance(value, kind) or ((value is True or value is False) and kind is int):
        raise ValueError(f"field {name!r} has the wrong type")
    return value


def _ids(body: dict[str, Any], name: str, allow_absent: bool) -> tuple[str, ...]:
    values = _req(body, name, list)
    for v in values:
        if type(v) is not str or not (is_object_id(v) or (allow_absent and v == ABSENT)):
            raise ValueError(f"field {name!r} holds something that is not an object id")
    return tuple(values)


def _corrupt(where: str, why: str) -> CorruptLog:
    return CorruptLog(
        f"{where}: corrupt record: {why}",
        "the log was damaged or written by something else; `git wal log` shows the "
        "records before it, and nothing after it is trusted",
    )


def summary(record: Record) -> str:
    """The one-line message of the append commit that carries ``record``."""
    if isinstance(record, Plan):
        return f"wal {record.lsn} plan: {record.task[:60]}"
    if isinstance(record, Intent):
        return f"wal {record.lsn} intent {record.tool} {' '.join(record.target)[:60]}"
    if isinstance(record, Commit):
        return f"wal {record.lsn} commit {record.intent}"
    if isinstance(record, Checkpoint):
        return f"wal {record.lsn} checkpoint {record.git[:12]} covers {record.covers}"
    if isinstance(record, Unlogged):
        return f"wal {record.lsn} unlogged {' '.join(record.paths)[:60]}"
    if isinstance(record, Seal):
        return f"wal {record.lsn} seal {record.last}"
    return f"wal {record.lsn} abort {record.intent}: {record.reason[:60]}"


