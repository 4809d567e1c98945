"""A command line cut into its simple commands, as a POSIX shell (bash) reads it.

Conservative by construction: it either returns every simple command the
line can run, or raises :class:`Unparseable`. Pipelines, lists (``;``,
``&``, ``&&``, ``||``, newlines), subshells and groups, ``if``/``while``/
``for`` bodies, command substitutions (``$(...)``, backticks, ``<(...)``)
and the bodies of here-documents are all cut into simple commands; what this
reader cannot follow with confidence (``case``, function definitions, arrays,
``coproc``, unbalanced quotes, a here-document whose unquoted body
substitutes a command) is refused rather than guessed.

A word keeps its text after quote removal. Where part of it is only known
when the line runs (``$VAR``, ``${...}``, a command substitution, an
unquoted glob or brace expansion) the word is ``dynamic``: its text is then
the literal parts and the expansion as written, and a reader deciding what
the word is must not rely on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Redirect", "Simple", "Unparseable", "Word", "simple_commands"]

MAX_DEPTH = 16  # nested substitutions and `sh -c` strings: deeper is refused
METACHARS = frozenset(" \t\n;&|()<>")
RESERVED_LEADING = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done",
                              "while", "until", "[["})
REFUSED_WORDS = frozenset({"case", "esac", "function", "coproc", "select"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
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


@dataclass(frozen=True)
class Redirect:
    op: str  # ">", ">>", ">|", "<>", "&>", "&>>", "<", "<<", "<<<", ">&", "<&"
    target: Word

    @property
    def writes(self) -> bool:
        return self.op in (">", ">>", ">|", "<>", "&>", "&>>") or (
            self.op == ">&" and not self.target.text.isdigit() and self.target.text != "-")


@dataclass(frozen=True)
class Simple:
    """One simple command: its assignments, words and redirections."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]


def simple_commands(text: str, depth: int = 0) -> list[Simple]:
    """Every simple command ``text`` runs, in the order they appear; commands
    in substitutions come before the command whose words hold them."""
    if depth > MAX_DEPTH:
        raise Unparseable("commands nested too deep")
    reader = _Reader(text, depth)
    reader.command_list(None)
    if reader.heredocs:
        raise Unparseable("a here-document without its body")
    return reader.out


class _Reader:
    def __init__(self, text: str, depth: int) -> None:
        self.s = text
        self.i = 0
        self.depth = depth
        self.out: list[Simple] = []
        self.heredocs: list[tuple[str, bool, bool]] = []  # delimiter, quoted, strip tabs

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    # -- lists and commands ----------------------------------------------------------

    def command_list(self, closer: str | None) -> None:
        """Simple commands up to ``closer`` (")" of a subshell or substitution) or the end."""
        assignments: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []

        def flush() -> None:
            self._emit(assignments, words, redirects)
            assignments.clear()
            words.clear()
            redirects.clear()

        while True:
            self._blanks()
            c = self.peek()
            if not c:
                if closer:
                    raise Unparseable(f"no closing {closer!r}")
                flush()
                return
            if c == "#":
                while self.peek() not in ("", "\n"):
                    self.i += 1
                continue
            if c == "\n":
                self.i += 1
                flush()
                self._bodies()
                continue
            if c in ";&|":
                if self.s.startswith(";;", self.i) or self.s.startswith(";&", self.i):
                    raise Unparseable("a case clause")
                if c == "&" and self.peek(1) == ">":
                    redirects.append(self._redirect())
                    continue
                self.i += 2 if self.s[self.i:self.i + 2] in ("&&", "||", "|&") else 1
                flush()
                continue
            if c == "(":
                if words or assignments or redirects:
                    raise Unparseable("a function definition or array")
                self.i += 1
                self.command_list(")")
                continue
            if c == ")":
                if closer != ")":
                    raise Unparseable("an unbalanced ')'")
                self.i += 1
                flush()
                return
            if c in "<>" or (c.isdigit() and self._fd_redirect()):
                if c in "<>" and self.peek(1) == "(":
                    self.i += 2
                    self.command_list(")")  # process substitution: its commands run too
                    words.append(Word(f"{c}(...)", dynamic=True))
                    continue
                redirects.append(self._redirect())
                continue
            word = self.word()
            if not words and not word.quoted and ASSIGNMENT.match(word.text):
                assignments.append(word)
            else:
                words.append(word)

    def _emit(self, assignments: list[Word], words: list[Word],
              redirects: list[Redirect]) -> None:
        # Reserved words open or close a compound command: the command proper follows.
        while words and not words[0].quoted and words[0].text in RESERVED_LEADING:
            if words[0].text == "[[":
                words = []  # a test: it runs nothing but its substitutions, already taken
                break
            words = words[1:]
        if words and not words[0].quoted:
            head = words[0].text
            if head in REFUSED_WORDS:
                raise Unparseable(f"a {head!r} command")
            if head == "for":
                words = []  # `for NAME in WORDS`: only its substitutions run, already taken
        if assignments or words or redirects:
            self.out.append(Simple(tuple(assignments), tuple(words), tuple(redirects)))

    def _blanks(self) -> None:
        while True:
            if self.peek() in (" ", "\t"):
                self.i += 1
            elif self.s.startswith("\\\n", self.i):
                self.i += 2
            else:
                return

    def _fd_redirect(self) -> bool:
        m = re.compile(r"\d+(?=[<>])").match(self.s, self.i)
        return m is not None

    def _redirect(self) -> Redirect:
        m = re.compile(r"\d*(&>>|&>|<<<|<<-|<<|<>|<&|>&|>>|>\||<|>)").match(self.s, self.i)
        if m is None:  # pragma: no cover - callers checked the first character
            raise Unparseable("a redirection")
        self.i = m.end()
        op = m.group(1)
        self._blanks()
        if not self.peek() or self.peek() in METACHARS:
            raise Unparseable(f"a {op!r} redirection without a target")
        start = self.i
        target = self.word()
        if op in ("<<", "<<-"):
            raw = self.s[start:self.i]
            quoted = any(q in raw for q in "'\"\\")
            self.heredocs.append((target.text, quoted, op == "<<-"))
            return Redirect("<<", target)
        return Redirect(op, target)

    def _bodies(self) -> None:
        """The bodies of the here-documents opened on the line just ended."""
        pending, self.heredocs = self.heredocs, []
        for delimiter, quoted, strip in pending:
            while True:
                end = self.s.find("\n", self.i)
                line = self.s[self.i:] if end < 0 else self.s[self.i:end]
                self.i = len(self.s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                if not quoted and ("`" in line or "$(" in line):
                    raise Unparseable("a here-document that substitutes a command")
                if end < 0:
                    raise Unparseable(f"a here-document without its end ({delimiter!r})")

    # -- words -----------------------------------------------------------------------------

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
        self.out.extend(simple_commands("".join(inner), self.depth + 1))
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
