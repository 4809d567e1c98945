"""Record types and their canonical encoding: the only place records become bytes.

A record is one JSON object, encoded with sorted keys, no insignificant white
space, UTF-8. Every record carries ``v`` (format version) and ``type``; a
reader refuses a version it does not know instead of guessing. docs/format.md
is the normative description of these fields.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import CorruptLog
from .ids import ABSENT, Lsn, RunId, is_object_id

FORMAT_VERSION = 1
REPLAY_SAFE = "safe"
REPLAY_UNSAFE = "unsafe"
MAX_DEPTH = 32  # JSON nesting a record may have; gitwal's own records need 4

# What a record may name (docs/format.md "Validation"). A log is data: these
# checks are what keeps a forged or fetched record from steering a reader
# outside the working tree, into .git, or to a symlink or a tool it never ran.
FILE_TOOLS = ("write_file", "replace_symbol", "replace_text", "ensure_line",
              "delete_file", "move_file")
PATH_ARGS = {"write_file": ("path",), "replace_symbol": ("path",),
             "replace_text": ("path",), "ensure_line": ("path",),
             "delete_file": ("path",), "move_file": ("src", "dst")}
MULTI_FILE_TOOL = "write_files"  # an agent hook's multi-file end state (args.paths)
EXEC_TOOL = "exec"
KNOWN_TOOLS = frozenset((*FILE_TOOLS, MULTI_FILE_TOOL, EXEC_TOOL))
FILE_MODES = (0o100644, 0o100755)  # a file tool's pre mode when the pre-image exists
EXEC_MODE = 0o040000
_AUTH_LEN = 64  # hex digits of an HMAC-SHA256
_HEX64 = re.compile(rf"[0-9a-f]{{{_AUTH_LEN}}}")


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
    # HMAC-SHA256 of the intent without it, keyed by this clone's secret
    # (authorship.py): present on an intent that carries a command. Encoded
    # only when present, so a log without it keeps its bytes.
    auth: str | None = None


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
    # (path, object id): what gitwal saved before it overwrote bytes it had
    # not written (a blob), or the snapshot a shell step's restore undid
    # (path ".", a tree); the append keeps each object alive.
    saved: tuple[tuple[str, str], ...] = ()


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


# Fields added to the format after version 1 shipped: encoded only when they
# carry something, so records without them stay byte-identical (and canonical).
OPTIONAL_FIELDS = frozenset({"saved", "auth", "worktree"})


def to_dict(record: Record) -> dict[str, Any]:
    """The record as plain data, with ``v`` and ``type``; lists for tuples."""
    out: dict[str, Any] = {"v": FORMAT_VERSION, "type": type_name(record)}
    for name in record.__dataclass_fields__:
        value = getattr(record, name)
        if name in OPTIONAL_FIELDS and not value:
            continue
        out[name] = [_plain(v) for v in value] if isinstance(value, tuple) else value
    if isinstance(record, Plan) and "worktree" in out:
        wt = out["worktree"]
        out["worktree"] = {"name": wt[0], "path": wt[1]}
    return out


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


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
    except RecursionError:
        raise _corrupt(where, "JSON nested too deeply") from None
    if not isinstance(raw, dict):
        raise _corrupt(where, "not a JSON object")
    if _too_deep(raw):
        # Every later reader (printing, hashing, --json) recurses over it too.
        raise _corrupt(where, f"JSON nested more than {MAX_DEPTH} levels deep")
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
        raise _corrupt(where, f"{kind} LSN {body.get('lsn')!r}: {e}") from None
    return record


def _too_deep(value: Any) -> bool:
    """True when ``value`` nests lists/objects more than MAX_DEPTH deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def path_problem(path: object) -> str:
    """Why ``path`` is not a normalised tree-relative POSIX path ("" when it is).

    The same rules as Worktree.confine, without the file system: a reader can
    refuse a record before anything looks at the tree."""
    if not isinstance(path, str):
        return f"path {path!r} is not a string"
    if not path or "\0" in path:
        return f"path {path!r} is empty or contains NUL"
    if path.startswith("/"):
        return f"path {path!r} is absolute"
    if "\\" in path:
        return f"path {path!r} contains a backslash"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"path {path!r} has an empty, '.' or '..' component"
        if part.lower() == ".git":
            return f"path {path!r} goes through .git"
    return ""


def _paths(name: str, values: Any, non_empty: bool = False,
           distinct: bool = False) -> tuple[str, ...]:
    if not isinstance(values, list) or (non_empty and not values):
        raise ValueError(f"{name} must be a {'non-empty ' if non_empty else ''}list of paths")
    for p in values:
        if why := path_problem(p):
            raise ValueError(f"{name}: {why}")
    if distinct and len(set(values)) != len(values):
        raise ValueError(f"{name} names a path twice")
    return tuple(values)


def _check_intent(tool: str, args: dict[str, Any], target: tuple[str, ...],
                  pre: tuple[str, ...], mode: tuple[int, ...]) -> None:
    """What an intent may ask of a reader: a known tool, on confined paths."""
    if tool not in KNOWN_TOOLS:
        raise ValueError(f"unknown tool {tool!r}")
    if tool == EXEC_TOOL:
        if target != (".",) or mode != (EXEC_MODE,):
            raise ValueError("an exec intent's target must be ['.'] and its mode [16384]")
        argv = args.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("an exec intent's args.argv must be a non-empty list of strings")
        cwd = args.get("cwd")
        if cwd is not None and cwd != "" and (why := path_problem(cwd)):
            raise ValueError(f"args.cwd: {why}")
        if "watch" in args:  # pathspecs for git add -f: confined like targets
            _paths("args.watch", args["watch"], non_empty=True)
        return
    _paths("target", list(target), non_empty=True, distinct=True)
    if tool == MULTI_FILE_TOOL:
        named = _paths("args.paths", args.get("paths"), non_empty=True)
    else:
        values = [args.get(n) for n in PATH_ARGS[tool]]
        for p in values:
            if why := path_problem(p):
                raise ValueError(f"path argument: {why}")
        named = tuple(str(p) for p in values)
    if named != target:
        raise ValueError(f"target {list(target)} is not the path arguments {list(named)}")
    for path, pre_id, m in zip(target, pre, mode, strict=True):
        if (pre_id == ABSENT) != (m == 0) or (m != 0 and m not in FILE_MODES):
            raise ValueError(f"{path}: mode {m:o} with pre {pre_id!r} (a file tool's mode "
                             "is 0 exactly when the pre-image is absent, else 100644 or "
                             "100755)")


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
        auth = body.get("auth")  # absent, never null: it is written only when present
        if "auth" in body and not (isinstance(auth, str) and _HEX64.fullmatch(auth)):
            raise ValueError(f"auth must be {_AUTH_LEN} lowercase hex digits")
        args = req("args", dict)
        _check_intent(tool, args, target, pre, mode)
        return Intent(
            run, lsn, tool, args, target, pre, post, mode,
            replay, req("key", str), check, step, auth,
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
        unlogged = _paths("unlogged", req("unlogged", list))
        if not all(type(n) is int for n in done):
            raise ValueError("done_steps must be integers")
        covers, committed = req("covers", int), req("committed", int)
        return Checkpoint(
            run, lsn, git, tree, req("ref", str), covers, plan_blob, committed,
            tuple(done), tuple(unlogged),
        )
    if cls is Unlogged:
        paths = _paths("paths", req("paths", list), non_empty=True)
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
    restored = _paths("restored", req("restored", list))
    saved = body.get("saved", [])
    if "saved" in body and not saved:
        raise ValueError("saved, when present, must not be empty (canonical form)")
    if not isinstance(saved, list) or not all(
        isinstance(s, list) and len(s) == 2 and all(type(x) is str for x in s)
        and is_object_id(s[1]) for s in saved
    ):
        raise ValueError("saved must be [path, object id] pairs")
    _paths("saved", [s[0] for s in saved if s[0] != "."])
    return Abort(
        run, lsn, Lsn(req("intent", int)), req("reason", str), tuple(restored),
        req("output", str), tuple((p, o) for p, o in saved),
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


# -- agent steps: the marks an agent's hook call leaves in its records --------

AGENT_ARG = "agent"  # the args key of an agent intent: {"name", "tool", "call", ...}
MISS = "prediction miss"  # how a commit's `verified` text starts when post != predicted


def agent_tag(intent: Intent) -> dict[str, Any] | None:
    tag = intent.args.get(AGENT_ARG)
    return tag if isinstance(tag, dict) else None


def is_miss(intent: Intent, commit: Commit) -> bool:
    """A commit that recorded a post other than the predicted one (agent steps only)."""
    return intent.post is not None and commit.post != intent.post
