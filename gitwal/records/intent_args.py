"""What an intent may ask of a reader: a tool gitwal has, with arguments of
the shape that tool takes, on confined paths (docs/format.md "Validation").

The lists of tools here are gitwal's own (changes/tools.py), repeated because
records sit below the layers that act on them; a test keeps the two equal.
"""

from __future__ import annotations

from typing import Any

from ..base.ids import ABSENT, is_object_id, valid_run_id
from .model import EXEC_TOOL
from .paths import checked_paths, path_problem

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
KNOWN_TOOLS = frozenset((*FILE_TOOLS, MULTI_FILE_TOOL, *RESTORING_TOOLS, EXEC_TOOL))
FILE_MODES = (0o100644, 0o100755)  # a file tool's pre mode when the pre-image exists
EXEC_MODE = 0o040000


def check_intent(tool: str, args: dict[str, Any], target: tuple[str, ...],
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
            checked_paths("args.watch", args["watch"], non_empty=True)
        if "confirm" in args and not (isinstance(args["confirm"], str) and args["confirm"]):
            raise ValueError("an exec intent's args.confirm must be a non-empty command")
        if "irreversible" in args and args["irreversible"] is not True:
            raise ValueError("an exec intent's args.irreversible, when present, is true")
        if "others" in args:
            _check_others(args["others"])
        return
    checked_paths("target", list(target), non_empty=True, distinct=True)
    if tool == MULTI_FILE_TOOL:
        named = checked_paths("args.paths", args.get("paths"), non_empty=True)
    elif tool in RESTORING_TOOLS:
        named = checked_paths("args.paths", args.get("paths"), non_empty=True)
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
