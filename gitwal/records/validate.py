"""Validation on read: the fields of one decoded record, typed and checked
(docs/format.md "Validation") before the record exists. codec.py parses the
bytes; this module builds the record from them, or says why it cannot.

A log is data: these checks are what keeps a forged or fetched record from
steering a reader outside the working tree, into .git, or to a symlink or a
tool it never ran.
"""

from __future__ import annotations

import re
from typing import Any

from ..base.ids import ABSENT, UNKNOWN, Lsn, RunId, is_object_id, valid_run_id
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
    Unlogged,
)

# What a record may name.
FILE_TOOLS = ("write_file", "replace_symbol", "replace_text", "ensure_line",
              "delete_file", "move_file")
PATH_ARGS = {"write_file": ("path",), "replace_symbol": ("path",),
             "replace_text": ("path",), "ensure_line": ("path",),
             "delete_file": ("path",), "move_file": ("src", "dst")}
MULTI_FILE_TOOL = "write_files"  # an agent hook's multi-file end state (args.paths)
# Steps that put recorded states back (docs/undo.md): args.paths, args.contents
# (the post states), args.modes, and args.undoes (LSNs) or args.redoes (an LSN).
RESTORING_TOOLS = ("undo", "redo")
# a claim's at and ttl (seconds): each below 2**36 (the year 4147), so at + ttl is a date
MAX_TIME = 1 << 36
KNOWN_TOOLS = frozenset((*FILE_TOOLS, MULTI_FILE_TOOL, *RESTORING_TOOLS, EXEC_TOOL))
FILE_MODES = (0o100644, 0o100755)  # a file tool's pre mode when the pre-image exists
EXEC_MODE = 0o040000
_AUTH_LEN = 64  # hex digits of an HMAC-SHA256
_HEX64 = re.compile(rf"[0-9a-f]{{{_AUTH_LEN}}}")


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
        if "confirm" in args and not (isinstance(args["confirm"], str) and args["confirm"]):
            raise ValueError("an exec intent's args.confirm must be a non-empty command")
        if "irreversible" in args and args["irreversible"] is not True:
            raise ValueError("an exec intent's args.irreversible, when present, is true")
        if "others" in args:
            _check_others(args["others"])
        return
    _paths("target", list(target), non_empty=True, distinct=True)
    if tool == MULTI_FILE_TOOL:
        named = _paths("args.paths", args.get("paths"), non_empty=True)
    elif tool in RESTORING_TOOLS:
        named = _paths("args.paths", args.get("paths"), non_empty=True)
        _check_restoring(tool, args, len(named))
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
        _check_intent(tool, args, target, pre, mode)
        if tool in RESTORING_TOOLS and any(
                x >= lsn for x in (args.get("undoes") or [args.get("redoes")])):
            raise ValueError(f"an {tool} intent names only earlier LSNs")
        withheld = _paths("withheld", body.get("withheld", []), distinct=True)
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
        paths = _paths("paths", req("paths", list), non_empty=True, distinct=True)
        at, ttl = req("at", int), req("ttl", int)
        if not (0 <= at <= MAX_TIME and 0 <= ttl <= MAX_TIME):
            # A log is data: a fetched or hand-made claim may carry any number,
            # and its end (at + ttl) is shown as a date and compared with now.
            raise ValueError(f"at and ttl must be from 0 to {MAX_TIME} seconds")
        return Claim(run, lsn, paths, at, ttl, _auth(body))
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
        req("output", str), tuple((p, o) for p, o in saved), *_decision(body),
        *_among(body, run), _auth(body),
    )


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
        _paths(name, [v[0] for v in value], distinct=name == "theirs")
        out.append(tuple((v[0], v[1], v[2]) for v in value))
    return out[0], out[1]


def _check_others(others: Any) -> None:
    """An exec intent's ``args.others``: other runs' newest LSNs when it was logged."""
    if not isinstance(others, dict) or not all(
            isinstance(r, str) and valid_run_id(r) and type(n) is int and n >= 1
            for r, n in others.items()):
        raise ValueError("an exec intent's args.others must map run ids to LSNs")


def _check_restoring(tool: str, args: dict[str, Any], n: int) -> None:
    """An undo or redo names what it puts back: one content and mode per path,
    and the steps it undoes (or the undo it redoes), all earlier LSNs."""
    contents, modes = args.get("contents"), args.get("modes")
    if not (isinstance(contents, list) and len(contents) == n and all(
            c == ABSENT or is_object_id(c) for c in contents)):
        raise ValueError(f"an {tool} intent's args.contents must be one object id (or "
                         f"{ABSENT!r}) per path")
    if not (isinstance(modes, list) and len(modes) == n and all(
            type(m) is int and (m == 0) == (c == ABSENT) and (m == 0 or m in FILE_MODES)
            for m, c in zip(modes, contents, strict=True))):
        raise ValueError(f"an {tool} intent's args.modes must be one file mode per path "
                         "(0 exactly where the content is absent)")
    lsns = args.get("undoes") if tool == "undo" else [args.get("redoes")]
    if not (isinstance(lsns, list) and lsns and all(
            type(x) is int and x >= 1 for x in lsns)):
        raise ValueError("an undo intent's args.undoes must be a non-empty list of LSNs"
                         if tool == "undo" else "a redo intent's args.redoes must be an LSN")


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
