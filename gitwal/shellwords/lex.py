"""A command line cut into its simple commands, as a POSIX shell (bash) reads it.

Conservative by construction: it either returns every simple command the
line can run, or raises :class:`Unparseable`. Pipelines, lists (``;``,
``&``, ``&&``, ``||``, newlines), subshells and groups, ``if``/``while``/
``for`` bodies, command substitutions (``$(...)``, backticks, ``<(...)``)
and the bodies of here-documents are all cut into simple commands; what this
reader cannot follow with confidence (``case``, function definitions, arrays,
``coproc``, unbalanced quotes, a here-document whose unquoted body
substitutes a command) is refused rather than guessed.

The words themselves are read by word.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .word import METACHARS, Unparseable, Word, WordReader

__all__ = ["Redirect", "Simple", "simple_commands"]

MAX_DEPTH = 16  # nested substitutions and `sh -c` strings: deeper is refused
RESERVED_LEADING = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done",
                              "while", "until", "[["})
REFUSED_WORDS = frozenset({"case", "esac", "function", "coproc", "select"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


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


class _Reader(WordReader):
    def __init__(self, text: str, depth: int) -> None:
        self.s = text
        self.i = 0
        self.depth = depth
        self.out: list[Simple] = []
        self.heredocs: list[tuple[str, bool, bool]] = []  # delimiter, quoted, strip tabs

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
        # After a reserved word (`! A=1 cmd`, `then A=1 cmd`) assignments come first again.
        while words and not words[0].quoted and ASSIGNMENT.match(words[0].text):
            assignments = [*assignments, words[0]]
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

    def _substitution(self, text: str) -> None:
        """The commands of a backquoted string, read one level deeper."""
        self.out.extend(simple_commands(text, self.depth + 1))
