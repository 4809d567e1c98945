"""JSON with comments, as Gemini CLI reads its settings.json.

Gemini CLI strips ``//`` and ``/* */`` comments before it parses the file, so
a user's settings may hold them. :func:`strip_comments` does the same: every
comment outside a string becomes spaces (its newlines stay, so a parse error
still names the right line), and says whether there was any. Trailing commas
are not JSON and stay an error.

:func:`edit` changes such a file without losing its comments: only the
top-level members whose values change are rewritten, in place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


def strip_comments(text: str) -> tuple[str, bool]:
    """``text`` with its comments blanked out, and whether it had any."""
    out: list[str] = []
    i, n, found = 0, len(text), False
    while i < n:
        ch = text[i]
        if ch == '"':  # a string: copied as is, up to its closing quote
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            found, i = True, j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2  # an unclosed comment runs to the end
            out.append("".join(c if c == "\n" else " " for c in text[i:j]))
            found, i = True, j
        else:
            out.append(ch)
            i += 1
    return "".join(out), found


@dataclass(frozen=True)
class Member:
    """A top-level ``"key": value`` of the object: where its key starts and
    where its value starts and ends (offsets into the text)."""

    key: str
    start: int
    value_start: int
    value_end: int


def _skip(blank: str, i: int) -> int:
    """The offset of the next significant character (``blank``: the text with
    comments blanked out, so only white space is to be skipped)."""
    while i < len(blank) and blank[i] in " \t\r\n":
        i += 1
    return i


def _value_end(blank: str, i: int) -> int:
    depth, n = 0, len(blank)
    while i < n:
        ch = blank[i]
        if ch == '"':
            i += 1
            while i < n and blank[i] != '"':
                i += 2 if blank[i] == "\\" else 1
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            if depth == 0:
                return i
            depth -= 1
            if depth == 0:
                return i + 1
        elif ch == "," and depth == 0:
            return i
        i += 1
    return n


def members(text: str) -> tuple[list[Member], int] | None:
    """The top-level members of the object in ``text`` and the offset of its
    closing brace; None when the text is not one object as expected."""
    blank, _ = strip_comments(text)
    i = _skip(blank, 0)
    if i >= len(blank) or blank[i] != "{":
        return None
    out: list[Member] = []
    i = _skip(blank, i + 1)
    while i < len(blank) and blank[i] != "}":
        if blank[i] != '"':
            return None
        key_end = i + 1
        while key_end < len(blank) and blank[key_end] != '"':
            key_end += 2 if blank[key_end] == "\\" else 1
        key_end += 1
        try:
            key = json.loads(blank[i:key_end])
        except ValueError:
            return None
        colon = _skip(blank, key_end)
        if colon >= len(blank) or blank[colon] != ":":
            return None
        start = _skip(blank, colon + 1)
        end = _value_end(blank, start)
        end = len(blank[:end].rstrip(" \t\r\n"))
        out.append(Member(key, i, start, end))
        i = _skip(blank, end)
        if i < len(blank) and blank[i] == ",":
            i = _skip(blank, i + 1)
    return (out, i) if i < len(blank) else None


def _indent(text: str, at: int) -> str:
    line = text[text.rfind("\n", 0, at) + 1:at]
    return line[:len(line) - len(line.lstrip(" \t"))]


def _dump(value: Any, indent: str) -> str:
    """``value`` as it would sit in a member indented by ``indent``: nested
    levels use that same unit (two spaces, four, a tab: the file's own)."""
    return json.dumps(value, indent=indent or "  ",
                      ensure_ascii=False).replace("\n", "\n" + indent)


def edit(text: str, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """``text`` (JSON with comments whose data is ``old``) made to hold ``new`` by
    rewriting only the top-level members that differ: every comment and every
    other byte stays. None when that is not possible without touching a
    comment (one inside a member that changes) or when the result would not
    read back as ``new``: the caller then keeps a backup and rewrites.

    One member at a time (removed, changed, then added ones), each step read
    back before the next, so no two edits of the text ever overlap."""
    keys = ([k for k in old if k not in new] + [k for k in old if k in new and
                                                 old[k] != new[k]]
            + [k for k in new if k not in old])
    current = dict(old)
    for key in keys:
        step = dict(current)
        if key in new:
            step[key] = new[key]
        else:
            del step[key]
        edited = _edit(text, current, step)
        if edited is None:
            return None
        text, current = edited, step
    return text


def _edit(text: str, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    found = members(text)
    if found is None:
        return None
    ms, close = found
    blank, _ = strip_comments(text)
    by_key = {m.key: m for m in ms}
    if set(by_key) != set(old):
        return None  # a key twice: which one the agent reads is not ours to guess
    ops: list[tuple[int, int, str]] = []  # (start, end, replacement), never overlapping
    for m in ms:
        span = text[m.start:m.value_end]
        if m.key in new and new[m.key] == old[m.key]:
            continue
        if strip_comments(span)[1]:
            return None
        if m.key in new:
            ops.append((m.value_start, m.value_end, _dump(new[m.key], _indent(text, m.start))))
            continue
        # Removed: the member, its line if it has one to itself, and one comma.
        line = text.rfind("\n", 0, m.start) + 1
        lead = line if not text[line:m.start].strip() else m.start
        after = _skip(blank, m.value_end)
        if after < len(blank) and blank[after] == ",":  # not the last member
            end = after + 1
            while end < len(text) and text[end] in " \t":
                end += 1
            if lead == line and text.startswith("\n", end):
                end += 1
            ops.append((lead, end, ""))
        else:
            prev = ms.index(m) - 1
            if prev >= 0:
                comma = _skip(blank, ms[prev].value_end)
                ops.append((comma, comma + 1, ""))
            ops.append((lead - 1 if lead == line and lead > 0 else lead, m.value_end, ""))
    added = [k for k in new if k not in old]
    if added:
        indent = _indent(text, ms[0].start) if ms else "  "
        kept = [m for m in ms if m.key in new]
        body = ",\n".join(f"{indent}{json.dumps(k, ensure_ascii=False)}: {_dump(new[k], indent)}"
                          for k in added)
        head = text[:close]
        if kept:
            ops.append((kept[-1].value_end, kept[-1].value_end, ","))
        ops.append((close, close, ("" if head.endswith("\n") else "\n") + body + "\n"))
    if any(strip_comments(text[start:end])[1] for start, end, _ in ops):
        return None  # a comment would go with what is removed
    out = text
    for start, end, repl in sorted(ops, key=lambda op: (op[0], op[1]), reverse=True):
        out = out[:start] + repl + out[end:]
    try:
        if json.loads(strip_comments(out)[0]) != new:
            return None
    except ValueError:
        return None
    return out
