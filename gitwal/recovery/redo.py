"""The ``git wal`` command line that performs a logged step again.

Every word is quoted so that the line stays one line and names the exact
file, whatever a hostile repository named it (docs/recovery.md, "The resume
prompt").
"""

from __future__ import annotations

import shlex
from typing import Any

from ..base.display import safe
from ..base.ids import UNKNOWN

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(arg: str) -> str:
    """One shell word for ``arg``, always on one line.

    ``shlex.quote`` keeps a newline inside its quotes, so a hostile file name
    would split the prompt's Action line; a word with anything unprintable is
    written in ANSI-C quoting (``$'...'``, bash and zsh), bytes that are not
    UTF-8 as ``\\xNN``, so the command still names the exact file.
    """
    if arg.isprintable():
        return shlex.quote(arg)
    out = []
    for ch in arg:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif ch in "\\'":
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    return "$'" + "".join(out) + "'"


def redo_command(tool: str, args: dict[str, Any], step: int | None = None,
                 run: str | None = None) -> str:
    """The `git wal` command line that performs the step again ("" for an
    agent step whose post-image was not predicted).

    ``run``: name the run (``--run``); needed whenever it is not the current
    run of the worktree the command will run in, harmless when it is.
    """
    q = quote
    opt = (f" --run {q(run)}" if run is not None else "") + (
        f" --step {step}" if step is not None else "")
    if tool == "exec":
        return f"git wal exec{opt} -- " + " ".join(q(str(a)) for a in args.get("argv", []))
    if tool in ("undo", "redo"):  # worked out again from the log, as the first time
        run_opt = f" --run {q(run)}" if run is not None else ""
        lsns = args.get("undoes", []) if tool == "undo" else [args.get("redoes")]
        return f"git wal {tool}{run_opt} " + " ".join(q(str(n)) for n in lsns)
    apply = f"git wal apply{opt}"
    if tool == "write_file":
        return (f"git cat-file blob {q(str(args['content']))} | "
                f"{apply} write-file {q(args['path'])} --from -")
    if tool == "replace_symbol":
        return f"{apply} replace-symbol {q(args['path'])} {q(args['old'])} {q(args['new'])}"
    if tool == "replace_text":
        return (f"{apply} replace-text {q(args['path'])} --old {q(args['old'])} "
                f"--new {q(args['new'])}")
    if tool == "ensure_line":
        return f"{apply} ensure-line {q(args['path'])} {q(args['line'])}"
    if tool == "delete_file":
        return f"{apply} delete-file {q(args['path'])}"
    if tool == "move_file":
        return f"{apply} move-file {q(args['src'])} {q(args['dst'])}"
    if tool == "write_files":  # an agent's multi-file call: one command per path
        if UNKNOWN in args.get("contents", []):
            return ""  # its result was never known: nothing to perform again
        return " && ".join(
            f"{apply} delete-file {q(path)}" if content == "absent" else
            f"git cat-file blob {q(str(content))} | {apply} write-file {q(path)} --from -"
            for path, content in zip(args.get("paths", []), args.get("contents", []),
                                     strict=False))
    return safe(str(f"{tool} {args}"))
