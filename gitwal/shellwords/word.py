"""One word of a command line, read as bash reads it: quotes and escapes
removed, expansions kept as written.

A word keeps its text after quote removal. Where part of it is only known
when the line runs (``$VAR``, ``${...}``, a command substitution, an
unquoted glob or brace expansion) the word is ``dynamic``: its text is then
the literal parts and the expansion as written, and a reader deciding what
the word is must not rely on it.

:class:`WordReader` is the base of lex.py's reader, which cuts the command
substitutions a word holds (``$(...)``, backquotes) into commands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Unparseable", "Word", "WordReader"]

METACHARS = frozenset(" \t\n;&|()<>")
ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
          "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


class Unparseable(ValueError):
    """The line holds something this reader does not follow with confidence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Word:
    text: str
    dynamic: bool = False  # part of it is known only when the line runs
    quoted: bool = False  # some part of it was quoted or escaped



class WordReader:
    """Words read at ``self.i`` of ``self.s``; lex.py's reader provides the rest."""

    s: str
    i: int

    def command_list(self, closer: str | None) -> None:
        raise NotImplementedError  # lex.py's: the commands of a `$(...)`, up to ")"

    def _substitution(self, text: str) -> None:
        raise NotImplementedError  # lex.py's: the commands of a backquoted string

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def word(self) -> Word:
        parts: list[str] = []
        dynamic = quoted = False
        brace = False  # an unquoted "{" seen: a following "," or ".." expands
        start = self.i
        while True:
            c = self.peek()
            if not c or c in METACHARS:
                break
            if c == "\\":
                quoted = True
                nxt = self.peek(1)
                if nxt == "\n":
                    self.i += 2
                    continue
                if not nxt:
                    raise Unparseable("a trailing backslash")
                parts.append(nxt)
                self.i += 2
            elif c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise Unparseable("an unbalanced single quote")
                parts.append(self.s[self.i + 1:end])
                self.i = end + 1
                quoted = True
            elif c == '"':
                self.i += 1
                dynamic |= self._double_quoted(parts)
                quoted = True
            elif c == "$" and self.peek(1) == "'":
                parts.append(self._ansi_c())
                quoted = True
            elif c == "$" and self.peek(1) == '"':
                self.i += 1  # $"...": a translated string, otherwise as "..."
            elif c in "$`":
                parts.append(self._expansion())
                dynamic = True
            else:
                if c in "*?[":
                    dynamic = True  # a glob: the file names are known only when it runs
                elif c == "{":
                    brace = True
                elif brace and (c == "," or self.s.startswith("..", self.i)):
                    dynamic = True  # a brace expansion
                elif c == "~" and self.i == start:
                    pass  # tilde expansion: kept as written, readers expand it
                parts.append(c)
                self.i += 1
        return Word("".join(parts), dynamic, quoted)

    def _double_quoted(self, parts: list[str]) -> bool:
        dynamic = False
        while True:
            c = self.peek()
            if not c:
                raise Unparseable("an unbalanced double quote")
            if c == '"':
                self.i += 1
                return dynamic
            if c == "\\" and self.peek(1) in ("$", "`", '"', "\\", "\n"):
                if self.peek(1) != "\n":
                    parts.append(self.peek(1))
                self.i += 2
            elif c == "$" and (self.peek(1) in ("'", '"') or not self.peek(1)):
                parts.append("$")
                self.i += 1
            elif c in "$`":
                parts.append(self._expansion())
                dynamic = True
            else:
                parts.append(c)
                self.i += 1

    def _expansion(self) -> str:
        """A ``$`` expansion or a backquoted command at ``self.i``, as written."""
        return self._backquoted() if self.peek() == "`" else self._dollar()

    def _dollar(self) -> str:
        """A ``$`` expansion at ``self.i``, as written; command substitutions are read."""
        start = self.i
        nxt = self.peek(1)
        if self.s.startswith("$((", self.i):
            self.i += 3
            self._balanced("(", ")", 2)
        elif nxt == "(":
            self.i += 2
            self.command_list(")")
        elif nxt == "{":
            self.i += 2
            self._balanced("{", "}", 1)
        elif nxt and (nxt.isalnum() or nxt == "_"):
            self.i += 1
            if nxt.isdigit():
                self.i += 1
            else:
                while self.peek() and (self.peek().isalnum() or self.peek() == "_"):
                    self.i += 1
        elif nxt and nxt in "@*#?-$!":
            self.i += 2
        else:
            self.i += 1
            return "$"
        return self.s[start:self.i]

    def _balanced(self, opening: str, closing: str, open_count: int) -> None:
        """Skip to the end of an arithmetic expansion or ``${...}``; one that holds
        a command substitution or a quote is refused (not followed)."""
        level = open_count
        while level:
            c = self.peek()
            if not c:
                raise Unparseable(f"an unbalanced {opening!r}")
            if c in "`'\"" or self.s.startswith("$(", self.i):
                raise Unparseable("an expansion holding quotes or a command")
            level += (c == opening) - (c == closing)
            self.i += 1

    def _backquoted(self) -> str:
        start = self.i
        self.i += 1
        inner: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise Unparseable("an unbalanced backquote")
            if c == "`":
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ("`", "\\", "$"):
                inner.append(self.peek(1))
                self.i += 2
                continue
            inner.append(c)
            self.i += 1
        self._substitution("".join(inner))
        return self.s[start:self.i]

    def _ansi_c(self) -> str:
        self.i += 2
        out: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise Unparseable("an unbalanced $'...' quote")
            self.i += 1
            if c == "'":
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            e = self.peek()
            self.i += 1
            if e in ANSI_C:
                out.append(ANSI_C[e])
            elif e in "xuU":
                size = {"x": 2, "u": 4, "U": 8}[e]
                m = re.compile(rf"[0-9A-Fa-f]{{1,{size}}}").match(self.s, self.i)
                if m is None:
                    out.append("\\" + e)
                    continue
                self.i = m.end()
                out.append(chr(int(m.group(), 16)))
            elif e in "01234567":
                m = re.compile(r"[0-7]{1,3}").match(self.s, self.i - 1)
                assert m is not None
                self.i = m.end()
                out.append(chr(int(m.group(), 8) & 0xFF))
            else:
                raise Unparseable(f"an escape \\{e} in $'...'")
