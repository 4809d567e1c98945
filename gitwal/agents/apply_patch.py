"""Codex's ``apply_patch`` format: parse a patch and compute every post-image.

::

    *** Begin Patch
    *** Add File: docs/new.md
    +first line
    *** Update File: src/app.py
    *** Move to: src/main.py
    @@ def main():
     context line
    -removed line
    +added line
    *** Delete File: old.txt
    *** End Patch

An update is a list of chunks; each chunk's old lines (context and ``-``
lines) are found in the file after the previous chunk (after its ``@@``
header line, when it names one; only at the end with ``*** End of File``)
the way Codex finds them (patch_seek.py: exactly, then ignoring trailing
white space, then surrounding white space, then typographic punctuation),
and replaced by its new lines (context and ``+``); a hunk without old lines
is appended at the end of the file.
A file the patch writes ends with a newline. Nothing here touches the disk:
:func:`post_images` maps pre-images to post-images, or raises
:class:`ToolRefused` when the patch would not apply (then nothing is logged
and Codex reports its own error).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..base.errors import ToolRefused
from .patch_seek import seek

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, UPDATE, DELETE, MOVE = "*** Add File: ", "*** Update File: ", "*** Delete File: ", \
    "*** Move to: "
EOF_MARK = "*** End of File"


@dataclass(frozen=True)
class Chunk:
    header: str | None  # the text after "@@", a line to find first
    old: tuple[str, ...]
    new: tuple[str, ...]
    at_end: bool = False
    # per line of ``new``: the index in ``old`` of the context line it is
    # (None: an added line). Codex writes a context line as the file has it,
    # not as the patch spells it (a loose match keeps the file's blanks).
    context: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class FileOp:
    kind: str  # add | update | delete
    path: str
    move_to: str | None = None
    content: tuple[str, ...] = ()  # add: the lines
    chunks: tuple[Chunk, ...] = field(default=())


def parse(text: str) -> list[FileOp]:
    # Lines end at \n only (a trailing \r dropped), as Codex reads a patch: a form
    # feed or a U+2028 inside a line is text, not a line break.
    lines = [ln.removesuffix("\r") for ln in text.strip().split("\n")]
    if not lines or lines[0].strip() != BEGIN or lines[-1].strip() != END:
        raise ToolRefused("apply_patch: the patch must start with '*** Begin Patch' and end "
                          "with '*** End Patch'")
    ops: list[FileOp] = []
    i, body = 0, lines[1:-1]
    while i < len(body):
        line = body[i]
        if line.startswith(ADD):
            path, i = line[len(ADD):].strip(), i + 1
            content = []
            while i < len(body) and body[i].startswith("+"):
                content.append(body[i][1:])
                i += 1
            ops.append(FileOp("add", path, content=tuple(content)))
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", line[len(DELETE):].strip()))
            i += 1
        elif line.startswith(UPDATE):
            path, i = line[len(UPDATE):].strip(), i + 1
            move = None
            if i < len(body) and body[i].startswith(MOVE):
                move, i = body[i][len(MOVE):].strip(), i + 1
            chunks, i = _chunks(body, i, path)
            ops.append(FileOp("update", path, move, chunks=tuple(chunks)))
        elif not line.strip():
            i += 1
        else:
            raise ToolRefused(f"apply_patch: unexpected line {line!r}")
    if not ops:
        raise ToolRefused("apply_patch: the patch changes no file")
    return ops


def _chunks(body: list[str], i: int, path: str) -> tuple[list[Chunk], int]:
    chunks: list[Chunk] = []
    while i < len(body) and not body[i].startswith("*** "):
        line = body[i]
        header: str | None = None
        if line.startswith("@@"):
            header = line[2:].strip() or None
            i += 1
        elif chunks:
            raise ToolRefused(f"apply_patch: {path}: expected '@@' before {line!r}")
        old: list[str] = []
        new: list[str] = []
        context: list[int | None] = []
        at_end = False
        while i < len(body):
            line = body[i]
            if line.strip() == EOF_MARK:
                at_end, i = True, i + 1
                break
            if line.startswith("@@") or line.startswith("*** "):
                break
            tag, rest = (line[:1], line[1:]) if line else (" ", "")
            if tag == " ":
                context.append(len(old))
                old.append(rest)
                new.append(rest)
            elif tag == "-":
                old.append(rest)
            elif tag == "+":
                context.append(None)
                new.append(rest)
            else:
                raise ToolRefused(f"apply_patch: {path}: bad hunk line {line!r}")
            i += 1
        if not old and not new:
            raise ToolRefused(f"apply_patch: {path}: an empty hunk")
        chunks.append(Chunk(header, tuple(old), tuple(new), at_end, tuple(context)))
    if not chunks:
        raise ToolRefused(f"apply_patch: {path}: an update with no hunk")
    return chunks, i


_EOL = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[tuple[str, str]]:
    """(content, ending) per line, an ending being \r\n, \r, \n or "" (the last line)."""
    out, at = [], 0
    for m in _EOL.finditer(text):
        out.append((text[at:m.start()], m.group()))
        at = m.end()
    if at < len(text):
        out.append((text[at:], ""))
    return out


def apply_update(text: str, chunks: tuple[Chunk, ...], path: str) -> str:
    """``text`` with ``chunks`` applied as Codex (0.169.0) applies them: every hunk
    located in the original lines (patch_seek.py), after the previous one, then
    all replaced. Line endings are kept: an untouched line keeps its own, a new
    line gets the file's first one (\n when it has none), and the file ends
    with a line ending."""
    source = split_lines(text)
    lines = [content for content, _ in source]
    edits: list[tuple[int, int, list[str]]] = []
    pos = 0
    for chunk in chunks:
        if chunk.header is not None:
            at = seek(lines, (chunk.header,), pos, False)
            if at is None:
                raise ToolRefused(f"apply_patch: {path}: no line {chunk.header!r}")
            pos = at + 1
        if not chunk.old:
            edits.append((len(lines), 0, list(chunk.new)))  # Codex appends an addition
            continue
        old, new = list(chunk.old), list(chunk.new)
        context = list(chunk.context) or [None] * len(new)
        found = seek(lines, old, pos, chunk.at_end)
        if found is None and old[-1] == "":
            # A trailing empty old line stands for the file's final newline.
            old = old[:-1]
            if new and new[-1] == "":
                new, context = new[:-1], context[:-1]
            found = seek(lines, old, pos, chunk.at_end)
        if found is None:
            raise ToolRefused(f"apply_patch: {path}: the hunk's lines were not found")
        # A context line is written as the file has it where the hunk matched.
        new = [lines[found + k] if k is not None and k < len(old) else line
               for line, k in zip(new, context, strict=True)]
        edits.append((found, len(old), new))
        pos = found + len(old)
    eol = next((e for _, e in source if e), "\n")
    out: list[tuple[str, str]] = list(source)
    for at, n, new in sorted(edits, key=lambda e: e[0], reverse=True):
        out[at:at + n] = [(line, eol) for line in new]
    return "".join(content + (ending or eol) for content, ending in out)


Content = bytes | None


def targets(ops: list[FileOp]) -> list[str]:
    """Every path the patch reads or writes, in order, without repeats."""
    out: list[str] = []
    for op in ops:
        for p in (op.path, op.move_to):
            if p and p not in out:
                out.append(p)
    return out


def post_images(ops: list[FileOp], pre: Mapping[str, Content]) -> dict[str, Content]:
    """path -> content after the patch, for every target (``None``: absent)."""
    state = dict(pre)
    for op in ops:
        cur = state.get(op.path)
        if op.kind == "add":
            state[op.path] = ("\n".join(op.content) + "\n").encode("utf-8")
        elif op.kind == "delete":
            if cur is None:
                raise ToolRefused(f"apply_patch: {op.path} does not exist")
            state[op.path] = None
        else:
            if cur is None:
                raise ToolRefused(f"apply_patch: {op.path} does not exist")
            try:
                text = cur.decode("utf-8")
            except UnicodeDecodeError:
                raise ToolRefused(f"apply_patch: {op.path} is not UTF-8 text") from None
            out = apply_update(text, op.chunks, op.path).encode("utf-8")
            if op.move_to and op.move_to != op.path:
                state[op.path] = None
                state[op.move_to] = out
            else:
                state[op.path] = out
    return state
