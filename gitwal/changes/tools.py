"""End-state tools as pure functions: (pre-images, args) -> post-images.

Nothing here touches the disk. A tool either returns the exact bytes each
target must hold afterwards (``None`` for "absent"), or raises
:class:`ToolRefused` -- before anything is logged. Because the post-image is
known in advance, recovery decides by comparing hashes, never by guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..base.errors import ToolRefused

Content = bytes | None  # None: the path does not exist
MODE_FILE = 0o100644

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_IDENT_CHARS = r"A-Za-z0-9_$"


@dataclass(frozen=True)
class Tool:
    name: str
    path_args: tuple[str, ...]  # argument names that are paths, in target order
    apply: Callable[[tuple[Content, ...], Mapping[str, Any]], tuple[Content, ...]]
    other_args: tuple[str, ...] = ()  # the other arguments it takes, all required

    @property
    def args(self) -> tuple[str, ...]:
        return (*self.path_args, *self.other_args)


def _text(data: Content, path: str, tool: str) -> str:
    if data is None:
        raise ToolRefused(f"{tool}: {path} does not exist", "check the path with `ls`")
    if b"\0" in data:
        raise ToolRefused(
            f"{tool}: {path} is a binary file", "use write-file to replace binary files"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolRefused(
            f"{tool}: {path} is not UTF-8 text", "use write-file for this file"
        ) from None


def _str_arg(args: Mapping[str, Any], name: str, tool: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolRefused(f"{tool}: argument {name!r} must be a string")
    return value


def _write_file(pre: tuple[Content, ...], args: Mapping[str, Any]) -> tuple[Content, ...]:
    content = args.get("content")
    if isinstance(content, str):
        try:
            return (content.encode("utf-8"),)
        except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
            raise ToolRefused("write_file: the content is not valid Unicode text",
                              "pass the bytes to write instead") from None
    if not isinstance(content, bytes):
        raise ToolRefused("write_file: argument 'content' must be bytes or str (UTF-8)")
    return (content,)


def _replace_symbol(pre: tuple[Content, ...], args: Mapping[str, Any]) -> tuple[Content, ...]:
    path = _str_arg(args, "path", "replace_symbol")
    old = _str_arg(args, "old", "replace_symbol")
    new = _str_arg(args, "new", "replace_symbol")
    for name, value in (("old", old), ("new", new)):
        if not _IDENT.fullmatch(value):
            raise ToolRefused(
                f"replace_symbol: {name} {value!r} is not an identifier",
                "use replace-text for anything that is not a single identifier",
            )
    text = _text(pre[0], path, "replace_symbol")
    # Identifier boundaries make the rename an end state: once no whole-word
    # `old` is left, running it again changes nothing.
    pattern = re.compile(rf"(?<![{_IDENT_CHARS}]){re.escape(old)}(?![{_IDENT_CHARS}])")
    return (pattern.sub(lambda _m: new, text).encode("utf-8"),)


def _replace_text(pre: tuple[Content, ...], args: Mapping[str, Any]) -> tuple[Content, ...]:
    path = _str_arg(args, "path", "replace_text")
    old = _str_arg(args, "old", "replace_text")
    new = _str_arg(args, "new", "replace_text")
    if not old:
        raise ToolRefused("replace_text: the old text is empty")
    text = _text(pre[0], path, "replace_text")
    # find(), not count(): count() skips overlapping matches ("aa" in "aaa").
    starts = []
    at = text.find(old)
    while at >= 0:
        starts.append(at)
        at = text.find(old, at + 1)
    if len(starts) != 1:
        raise ToolRefused(
            f"replace_text: the old text occurs {len(starts)} times in {path}; it must "
            "occur exactly once",
            "include more surrounding text so the match is unique" if starts else
            f"the text is not in {path}: read the file again and copy the text exactly "
            "(white space and line endings count)",
        )
    at = starts[0]
    return ((text[:at] + new + text[at + len(old) :]).encode("utf-8"),)


def _ensure_line(pre: tuple[Content, ...], args: Mapping[str, Any]) -> tuple[Content, ...]:
    line = _str_arg(args, "line", "ensure_line")
    if "\n" in line or "\r" in line or "\0" in line:
        raise ToolRefused("ensure_line: the line must not contain a line break or NUL")
    data = pre[0] or b""
    if data:
        _text(data, _str_arg(args, "path", "ensure_line"), "ensure_line")
    encoded = line.encode("utf-8")
    if any(existing.rstrip(b"\r") == encoded for existing in data.split(b"\n")):
        return (data,)
    # Keep the file's own line endings.
    eol = b"\r\n" if b"\r\n" in data else b"\n"
    if data and not data.endswith(b"\n"):
        data += eol
    return (data + encoded + eol,)


def _delete_file(pre: tuple[Content, ...], args: Mapping[str, Any]) -> tuple[Content, ...]:
    if pre[0] is None:
        path = _str_arg(args, "path", "delete_file")
        raise ToolRefused(f"delete_file: {path} does not exist")
    return (None,)


def _move_file(pre: tuple[Content, ...], args: Mapping[str, Any]) -> tuple[Content, ...]:
    src = _str_arg(args, "src", "move_file")
    dst = _str_arg(args, "dst", "move_file")
    if src == dst:
        raise ToolRefused("move_file: source and destination are the same path")
    if pre[0] is None:
        raise ToolRefused(f"move_file: {src} does not exist")
    if pre[1] is not None:
        raise ToolRefused(
            f"move_file: {dst} already exists", "delete it first, or pick another name"
        )
    return (None, pre[0])


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("write_file", ("path",), _write_file, ("content",)),
        Tool("replace_symbol", ("path",), _replace_symbol, ("old", "new")),
        Tool("replace_text", ("path",), _replace_text, ("old", "new")),
        Tool("ensure_line", ("path",), _ensure_line, ("line",)),
        Tool("delete_file", ("path",), _delete_file),
        Tool("move_file", ("src", "dst"), _move_file),
    )
}


def get(name: str) -> Tool:
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolRefused(
            f"unknown tool {name!r}", f"tools: {', '.join(sorted(TOOLS))}, and exec"
        )
    return tool


def check_args(tool: Tool, args: Mapping[str, Any]) -> None:
    """Refuse an argument the tool does not take, or one it needs and lacks,
    naming the arguments it takes (a misspelt keyword is not a wrong path)."""
    unknown = sorted(set(args) - set(tool.args))
    missing = [name for name in tool.args if name not in args]
    if not unknown and not missing:
        return
    problems = []
    if unknown:
        problems.append(f"unknown argument{'s' if len(unknown) > 1 else ''} "
                        + ", ".join(repr(n) for n in unknown))
    if missing:
        problems.append(f"missing argument{'s' if len(missing) > 1 else ''} "
                        + ", ".join(repr(n) for n in missing))
    raise ToolRefused(f"{tool.name}: {'; '.join(problems)}",
                      f"{tool.name} takes {', '.join(tool.args)} "
                      "(and check, step, timeout)")


# Steps that put recorded states back (undo.py): their args name each target's
# post mode, since the state they restore may have had another one.
RESTORING_TOOLS = ("undo", "redo")


def post_modes(tool: str, pre_modes: tuple[int, ...],
               args: Mapping[str, Any] | None = None) -> tuple[int, ...]:
    """The git mode each target gets: edits keep the mode; a move carries it;
    an undo or redo sets the one its args record."""
    if tool in RESTORING_TOOLS and args is not None:
        modes = args.get("modes")
        if isinstance(modes, list) and len(modes) == len(pre_modes):
            return tuple(m or MODE_FILE for m in modes)
    if tool == "move_file":
        return (0, pre_modes[0] or MODE_FILE)
    return tuple(m or MODE_FILE for m in pre_modes)
