"""Validation on read: the fields of one decoded record, typed and checked
(docs/format.md "Validation") before the record exists. codec.py parses the
bytes; this module builds the record from them, or says why it cannot. The
paths a record names are checked by paths.py, an intent's tool and arguments
by intent_args.py.

A log is data: these checks are what keeps a forged or fetched record from
steering a reader outside the working tree, into .git, or to a symlink or a
tool it never ran.
"""

from __future__ import annotations

import re
from typing import Any

from ..base.ids import ABSENT, UNKNOWN, Lsn, RunId, is_object_id, valid_run_id
from .intent_args import MULTI_FILE_TOOL, RESTORING_TOOLS, check_intent
from .model import (
    EXEC_TOOL,
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Abort,
    Approval,
    Checkpoint,
    Claim,
    Commit,
    Intent,
    Plan,
    Record,
    Seal,
    Takeover,
    Unlogged,
)
from .paths import checked_paths

# a claim's at and ttl (seconds): each below 2**36 (the year 4147), so at + ttl is a date
MAX_TIME = 1 << 36
_AUTH_LEN = 64  # hex digits of an HMAC-SHA256
_HEX64 = re.compile(rf"[0-9a-f]{{{_AUTH_LEN}}}")


def build(cls: type[Record], body: dict[str, Any]) -> Record:
    """The record of type ``cls`` from its fields; ValueError or TypeError says
    which field is wrong (codec.decode reports it as a corrupt record)."""

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
        worktree = _worktree(req("worktree", dict)) if "worktree" in body else None
        return Plan(run, lsn, req("task", str), base, branch, tuple(steps), worktree)
    if cls is Intent:
        target = tuple(req("target", list))
        if not target or not all(isinstance(t, str) for t in target):
            raise ValueError("target must be a non-empty list of paths")
        tool = req("tool", str)
        pre = ids("pre")
        req("post", (list, type(None)))
        post = None if body["post"] is None else _ids(body, "post", True, unknown=True)
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
        # An unpredicted post is an agent's multi-file step, never replayed.
        if post is not None and UNKNOWN in post and (
                tool != MULTI_FILE_TOOL or replay != REPLAY_UNSAFE):
            raise ValueError(f"post {UNKNOWN!r} is for {MULTI_FILE_TOOL} intents that are "
                             f"{REPLAY_UNSAFE}")
        check = body.get("check")
        if check is not None and not isinstance(check, str):
            raise ValueError("check must be a string or null")
        step = body.get("step")
        if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
            raise ValueError("step must be an integer or null")
        auth = _auth(body)
        args = req("args", dict)
        check_intent(tool, args, target, pre, mode)
        if tool in RESTORING_TOOLS and any(
                x >= lsn for x in (args.get("undoes") or [args.get("redoes")])):
            raise ValueError(f"an {tool} intent names only earlier LSNs")
        withheld = checked_paths("withheld", body.get("withheld", []), distinct=True)
        if not set(withheld) <= set(target) or (withheld and tool == EXEC_TOOL):
            raise ValueError("withheld names some of a file intent's targets")
        return Intent(
            run, lsn, tool, args, target, pre, post, mode,
            replay, req("key", str), check, step, auth, withheld,
        )
    if cls is Commit:
        recovered = body.get("recovered", False)
        if not isinstance(recovered, bool):
            raise ValueError("recovered must be a boolean")
        return Commit(
            run, lsn, Lsn(req("intent", int)), ids("post"), req("verified", str), recovered,
            *_decision(body), *_among(body, run), _auth(body),
        )
    if cls is Checkpoint:
        git, tree, plan_blob = req("git", str), req("tree", str), req("plan", str)
        if not all(is_object_id(x) for x in (git, tree, plan_blob)):
            raise ValueError("git, tree and plan must be object ids")
        done = req("done_steps", list)
        unlogged = checked_paths("unlogged", req("unlogged", list))
        if not all(type(n) is int for n in done):
            raise ValueError("done_steps must be integers")
        covers, committed = req("covers", int), req("committed", int)
        return Checkpoint(
            run, lsn, git, tree, req("ref", str), covers, plan_blob, committed,
            tuple(done), tuple(unlogged),
        )
    if cls is Unlogged:
        paths = checked_paths("paths", req("paths", list), non_empty=True)
        expected, observed = ids("expected"), ids("observed")
        if len(expected) != len(paths) or len(observed) != len(paths):
            raise ValueError("expected and observed must have one entry per path")
        theirs, claimed = _among(body, run)
        if claimed or not {t[0] for t in theirs} <= set(paths):
            raise ValueError("an unlogged record's theirs names some of its paths (and "
                             "it has no claimed)")
        return Unlogged(run, lsn, tuple(paths), expected, observed, req("noticed", str),
                        theirs)
    if cls is Approval:
        intent, who = req("intent", int), req("approved_by", str)
        if not 1 <= intent < lsn:
            raise ValueError("an approval names an earlier intent")
        if not who:
            raise ValueError("approved_by must not be empty")
        note = body.get("note", "")
        if "note" in body and not (isinstance(note, str) and note):
            raise ValueError("note, when present, must be a non-empty string")
        return Approval(run, lsn, Lsn(intent), who, note, _auth(body))
    if cls is Claim:
        paths = checked_paths("paths", req("paths", list), non_empty=True, distinct=True)
        at, ttl = req("at", int), req("ttl", int)
        if not (0 <= at <= MAX_TIME and 0 <= ttl <= MAX_TIME):
            # A log is data: a fetched or hand-made claim may carry any number,
            # and its end (at + ttl) is shown as a date and compared with now.
            raise ValueError(f"at and ttl must be from 0 to {MAX_TIME} seconds")
        return Claim(run, lsn, paths, at, ttl, _auth(body))
    if cls is Takeover:
        return _takeover(run, lsn, body, req)
    if cls is Seal:
        last, head, tree = req("last", int), req("head", str), req("tree", str)
        if last != lsn - 1:
            raise ValueError("last must be the LSN just before the seal")
        if not (is_object_id(head) and is_object_id(tree)):
            raise ValueError("head and tree must be object ids")
        return Seal(run, lsn, last, head, tree)
    restored = checked_paths("restored", req("restored", list))
    saved = body.get("saved", [])
    if "saved" in body and not saved:
        raise ValueError("saved, when present, must not be empty (canonical form)")
    if not isinstance(saved, list) or not all(
        isinstance(s, list) and len(s) == 2 and all(type(x) is str for x in s)
        and is_object_id(s[1]) for s in saved
    ):
        raise ValueError("saved must be [path, object id] pairs")
    checked_paths("saved", [s[0] for s in saved if s[0] != "."])
    return Abort(
        run, lsn, Lsn(req("intent", int)), req("reason", str), tuple(restored),
        req("output", str), tuple((p, o) for p, o in saved), *_decision(body),
        *_among(body, run), _auth(body),
    )


def _worktree(wt: dict[str, Any]) -> tuple[str, str]:
    if set(wt) != {"name", "path"} or not all(isinstance(v, str) for v in wt.values()):
        raise ValueError("worktree must be an object with string name and path")
    return wt["name"], wt["path"]


_CLONE = re.compile(r"[0-9a-f]{16}")


def _takeover(run: RunId, lsn: Lsn, body: dict[str, Any], req: Any) -> Takeover:
    clone, taken, at = req("clone", str), req("taken", str), req("at", int)
    if not _CLONE.fullmatch(clone):
        raise ValueError("clone must be 16 lowercase hex digits")
    if not is_object_id(taken):
        raise ValueError("taken must be a commit id")
    if not 0 <= at <= MAX_TIME:
        raise ValueError(f"at must be from 0 to {MAX_TIME} seconds")
    return Takeover(run, lsn, clone, req("host", str), _worktree(req("worktree", dict)),
                    req("remote", str), taken, at)


def _auth(body: dict[str, Any]) -> str | None:
    """``auth``: absent, never null (it is written only when present), else
    64 lowercase hex digits."""
    auth = body.get("auth")
    if "auth" in body and not (isinstance(auth, str) and _HEX64.fullmatch(auth)):
        raise ValueError(f"auth must be {_AUTH_LEN} lowercase hex digits")
    return auth if isinstance(auth, str) else None


def _decision(body: dict[str, Any]) -> tuple[str, str]:
    """``decided_by`` and ``note`` of a closing record: absent, or (canonical
    form) present and non-empty; a note only with a decider."""
    out = []
    for name in ("decided_by", "note"):
        value = body.get(name, "")
        if name in body and not (isinstance(value, str) and value):
            raise ValueError(f"{name}, when present, must be a non-empty string")
        out.append(value)
    if out[1] and not out[0]:
        raise ValueError("note is only written with decided_by")
    return out[0], out[1]


Named = tuple[tuple[str, str, int], ...]


def _among(body: dict[str, Any], run: str) -> tuple[Named, Named]:
    """``theirs`` and ``claimed`` of a closing record (a shell step among other
    runs): absent, or non-empty lists of ``[path, run, LSN]``, each path named
    once, each run another run's id."""
    out: list[Named] = []
    for name in ("theirs", "claimed"):
        value = body.get(name, [])
        if name in body and not value:
            raise ValueError(f"{name}, when present, must not be empty (canonical form)")
        if not isinstance(value, list) or not all(
                isinstance(v, list) and len(v) == 3 and type(v[0]) is str
                and type(v[1]) is str and valid_run_id(v[1]) and v[1] != run
                and type(v[2]) is int and v[2] >= 1 for v in value):
            raise ValueError(f"{name} must be [path, another run's id, LSN] triples")
        checked_paths(name, [v[0] for v in value], distinct=name == "theirs")
        out.append(tuple((v[0], v[1], v[2]) for v in value))
    return out[0], out[1]


def _req(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    try:
        value = body[name]
    except KeyError:
        raise ValueError(f"missing field {name!r}") from None
    if not isinstance(value, kind) or ((value is True or value is False) and kind is int):
        raise ValueError(f"field {name!r} has the wrong type")
    return value


def _ids(body: dict[str, Any], name: str, allow_absent: bool,
         unknown: bool = False) -> tuple[str, ...]:
    values = _req(body, name, list)
    for v in values:
        if type(v) is not str or not (is_object_id(v) or (allow_absent and v == ABSENT)
                                      or (unknown and v == UNKNOWN)):
            raise ValueError(f"field {name!r} holds something that is not an object id")
    return tuple(values)
