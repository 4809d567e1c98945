"""JSON with comments, as Gemini CLI reads its settings.json.

Gemini CLI strips ``//`` and ``/* */`` comments before it parses the file, so
a user's settings may hold them. :func:`strip_comments` does the same: every
comment outside a string becomes spaces (its newlines stay, so a parse error
still names the right line), and says whether there was any. Trailing commas
are not JSON and stay an error.
"""

from __future__ import annotations


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
