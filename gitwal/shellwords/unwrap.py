"""The commands a line runs, as programs see them: wrappers taken off, shell
strings read, git's global options normalized.

``env -u X A=b nice -n 5 git -C dir --no-pager push`` runs ``git push``;
``sh -c 'git push'``, ``eval git push``, ``find . -exec git push ';'``,
``xargs git push``, ``watch git push`` and ``git wal exec -- git push`` too.
Each :class:`Command` keeps its words as written (after the wrappers) and
its ``argv``: the program by its base name and, for git, the subcommand
right after ``git`` (global options dropped, the local user's aliases
expanded). A wrapper option wrappers.py does not know, a command name known
only when the line runs, a shell reading commands from its input, or a
``-c alias.*=`` is :class:`~gitwal.shellwords.word.Unparseable`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .lex import MAX_DEPTH, Redirect, Simple, simple_commands
from .word import Unparseable, Word
from .wrappers import WRAPPERS, take_options

__all__ = ["Command", "aliases_of", "commands"]

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox-sh"})


@dataclass(frozen=True)
class Command:
    """One command the line runs."""

    words: tuple[Word, ...]  # as written, wrappers and assignments taken off
    redirects: tuple[Redirect, ...] = ()
    assignments: tuple[Word, ...] = ()
    argv: tuple[str, ...] = ()  # the program by its base name; git normalized

    @property
    def written(self) -> str:
        return " ".join(w.text for w in self.words)

    @property
    def text(self) -> str:
        return " ".join(self.argv)


def aliases_of(entries: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """git's ``alias.NAME`` values from config entries (name, value), names
    lower-cased as git looks them up."""
    return {name[len("alias."):].lower(): value for name, value in entries
            if name.lower().startswith("alias.") and value is not None}


def commands(text: str, aliases: Mapping[str, str] | None = None,
             depth: int = 0) -> list[Command]:
    """Every command ``text`` runs (raises :class:`Unparseable`). ``aliases``:
    git's ``alias.*`` of the local user's config (name -> value)."""
    out: list[Command] = []
    for simple in simple_commands(text, depth):
        out.extend(_Unwrap(aliases or {}, depth).simple(simple))
    return out


class _Unwrap:
    def __init__(self, aliases: Mapping[str, str], depth: int) -> None:
        self.aliases = aliases
        self.depth = depth

    def nested(self, text: str) -> list[Command]:
        if self.depth + 1 > MAX_DEPTH:
            raise Unparseable("commands nested too deep")
        return commands(text, self.aliases, self.depth + 1)

    def simple(self, simple: Simple) -> list[Command]:
        found = self.words(list(simple.words), list(simple.assignments))
        first = found[0]  # the command the simple command runs (its words may be none)
        return [Command(first.words, simple.redirects, first.assignments, first.argv),
                *found[1:]]

    def words(self, words: list[Word], assignments: list[Word]) -> list[Command]:
        """The command ``words`` runs (first) and any it runs in turn (after)."""
        more: list[Command] = []
        while words:
            head = words[0]
            if head.dynamic:
                raise Unparseable(f"a command named by an expansion ({head.text!r})")
            name = os.path.basename(head.text)
            if name in WRAPPERS:
                words = self.wrapper(name, words[1:], assignments, more)
                continue
            if name in SHELLS:
                return [self.done(words, assignments), *self.shell(words[1:]), *more]
            if name == "eval":
                return [self.done(words, assignments), *self.nested(_static(words[1:])),
                        *more]
            if name == "find":
                return [self.done(words, assignments), *self.find(words[1:]), *more]
            if name == "git":
                return [*self.git(words, assignments), *more]
            if name == "git-wal":
                return [self.done(words, assignments), *self.wal_exec(words[1:]), *more]
            return [self.done(words, assignments), *more]
        return [Command((), (), tuple(assignments)), *more]

    def done(self, words: Sequence[Word], assignments: Sequence[Word],
             argv: Sequence[str] | None = None) -> Command:
        if argv is None:
            argv = [os.path.basename(words[0].text), *(w.text for w in words[1:])]
        return Command(tuple(words), (), tuple(assignments), tuple(argv))

    # -- wrappers ----------------------------------------------------------------------

    def wrapper(self, name: str, rest: list[Word], assignments: list[Word],
                more: list[Command]) -> list[Word]:
        spec = WRAPPERS[name]
        seen, rest, values = take_options(rest, spec)
        if name == "env":
            for value in values.get("S", []) + values.get("split-string", []):
                split = simple_commands(value, self.depth + 1)
                if len(split) != 1 or split[0].redirects:
                    raise Unparseable("an `env -S` string that is not one command")
                rest = [*split[0].assignments, *split[0].words, *rest]
        # `time` is also bash's keyword, after which assignments may come
        if name in ("env", "sudo", "doas", "time"):
            while rest and not rest[0].quoted and "=" in rest[0].text and \
                    not rest[0].text.startswith("="):
                assignments.append(rest[0])
                rest = rest[1:]
        if name == "command" and seen & {"v", "V"}:
            return []  # `command -v NAME` names a command, it does not run one
        if name == "watch" and not seen & {"x", "exec"}:
            more.extend(self.nested(_static(rest)))  # watch runs its words through sh -c
            return []
        if name == "flock" and (strings := values.get("c", []) + values.get("command", [])):
            for string in strings:
                more.extend(self.nested(string))  # flock -c runs it with sh -c
            return []
        return rest

    def shell(self, rest: list[Word]) -> list[Command]:
        """What ``sh [options] ...`` runs: its -c string, read here; a script
        file is a program like any other; a shell reading its input is refused."""
        string = False
        i = 0
        while i < len(rest) and (rest[i].text.startswith(("-", "+")) or rest[i].dynamic):
            w = rest[i]
            if w.dynamic:
                raise Unparseable(f"a shell option known only when it runs ({w.text!r})")
            if w.text in ("-", "--"):
                i += 1
                break
            if w.text.startswith("--"):
                i += 2 if w.text in ("--rcfile", "--init-file") else 1
                continue
            if w.text[1:] in ("o", "O"):
                i += 2
                continue
            string |= "c" in w.text
            if "s" in w.text[1:] or "i" in w.text[1:]:
                raise Unparseable("a shell reading commands from its input")
            i += 1
        if string:
            if i >= len(rest):
                raise Unparseable("`sh -c` without its command string")
            if rest[i].dynamic:
                raise Unparseable("a `sh -c` string known only when it runs")
            return self.nested(rest[i].text)
        if i >= len(rest):
            raise Unparseable("a shell reading commands from its input")
        return []  # a script file: a program like any other

    def find(self, rest: list[Word]) -> list[Command]:
        out: list[Command] = []
        i = 0
        while i < len(rest):
            if rest[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                while j < len(rest) and rest[j].text not in (";", "+"):
                    j += 1
                out.extend(self.words(rest[i + 1:j], []))
                i = j
            i += 1
        return out

    # -- git ---------------------------------------------------------------------------

    def git(self, words: list[Word], assignments: list[Word],
            expanded: int = 0) -> list[Command]:
        """``git [global options] SUBCOMMAND ARGS`` as ``git SUBCOMMAND ARGS``."""
        for a in assignments:
            if a.text.startswith("GIT_CONFIG"):
                raise Unparseable("git configuration set by the environment")
        i = 1
        while i < len(words) and words[i].text.startswith("-"):
            w = words[i]
            if w.dynamic:
                raise Unparseable(f"a git option known only when it runs ({w.text!r})")
            opt, eq, value = w.text.partition("=")
            if opt in GIT_FLAGS:
                i += 1
                continue
            if opt in GIT_VALUED:
                if not eq or opt in ("-C", "-c"):  # -c's value holds "=" itself
                    if i + 1 >= len(words) or words[i + 1].dynamic:
                        raise Unparseable(f"git {opt} without a value known now")
                    value = words[i + 1].text
                    i += 1
                i += 1
                if opt in ("-c", "--config-env") and value.split("=", 1)[0].lower().startswith(
                        "alias."):
                    raise Unparseable("a git alias defined on the command line")
                continue
            if opt in ("--version", "-v", "--help", "-h"):
                break
            raise Unparseable(f"a git option this reader does not know ({w.text!r})")
        if i >= len(words):
            return [self.done(words, assignments, ["git"])]
        sub = words[i]
        if sub.dynamic:
            raise Unparseable(f"a git command known only when it runs ({sub.text!r})")
        rest = words[i + 1:]
        alias = self.aliases.get(sub.text.lower())
        if alias is not None and expanded < MAX_DEPTH:
            if alias.startswith("!"):
                return [self.done(words, assignments, ["git", sub.text, *(w.text for w in rest)]),
                        *self.nested(alias[1:] + " " + shlex.join(_texts(rest)))]
            try:
                parts = [Word(p) for p in shlex.split(alias)]
            except ValueError as e:
                raise Unparseable(f"git alias {sub.text!r}: {e}") from None
            return self.git([words[0], *parts, *rest], assignments, expanded + 1)
        argv = ["git", sub.text, *(w.text for w in rest)]
        nested = self.wal_exec(rest) if sub.text == "wal" else []
        return [self.done(words, assignments, argv), *nested]

    def wal_exec(self, rest: Sequence[Word]) -> list[Command]:
        """``git wal exec [options] -- ARGV`` runs ARGV."""
        if not rest or rest[0].text != "exec":
            return []
        for k, w in enumerate(rest):
            if w.text == "--":
                return self.words(list(rest[k + 1:]), [])
        return []


GIT_FLAGS = frozenset({"-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects",
                       "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
                       "--icase-pathspecs", "--no-optional-locks", "--no-lazy-fetch",
                       "--no-advice", "--exec-path", "--html-path", "--man-path",
                       "--info-path", "--list-cmds"})
GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                        "--super-prefix", "--attr-source"})


def _texts(words: Sequence[Word]) -> list[str]:
    return [w.text for w in words]


def _static(words: Sequence[Word]) -> str:
    """The words as one line, as eval and watch join them; refused when one is dynamic."""
    if any(w.dynamic for w in words):
        raise Unparseable("a command line built when it runs")
    return " ".join(w.text for w in words)

