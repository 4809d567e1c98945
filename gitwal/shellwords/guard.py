"""What an agent's shell call may not run, whatever its spelling: a person's
decision, or a change of gitwal's settings (docs/security.md, "What an
agent's tool call cannot do").

Refused (the reason is returned; ``None``: nothing of this kind was found):

* ``git wal approve`` and ``git wal resolve`` (also ``git-wal ...``,
  ``python -m gitwal ...``): they record a person's decision;
* ``git config`` that changes a ``wal.*`` key or section, or an
  ``include.*``/``includeIf.*`` key (an included file may set ``wal.*``),
  ``git config --edit``;
* a write to a git config file (``.git/config``, ``config.worktree``,
  ``~/.gitconfig``, ``~/.config/git/config``, ``/etc/gitconfig``) by a
  redirection, or a command other than a reader (``cat``, ``grep`` ...)
  naming one; any command naming gitwal's per-clone secret (``wal/secret``);
* a line this reader cannot follow (lex.py): it could be any of these.

A program that does these things itself (a script, ``python -c``) is out of
reach of any reading of the command line: the terminal confirmation of
``approve``/``resolve`` (decisions/resolve.py) is the check that does not depend on
the spelling.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from .unwrap import Command, commands
from .word import Unparseable

__all__ = ["config_file", "refusal"]

DECISIONS = frozenset({"approve", "resolve"})
READERS = frozenset({"cat", "less", "more", "head", "tail", "grep", "egrep", "fgrep", "rg",
                     "ag", "wc", "ls", "stat", "file", "diff", "cmp", "md5sum", "sha1sum",
                     "sha256sum", "bat", "od", "hexdump", "git"})
CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l",
                          "--list", "--get-color", "--get-colorbool", "get", "list",
                          "get-color", "get-colorbool"})
CONFIG_WRITES = frozenset({"set", "unset", "rename-section", "remove-section", "edit"})
CONFIG_WRITE_MODES = frozenset({"--add", "--replace-all", "--unset", "--unset-all",
                                "--rename-section", "--remove-section", "--edit", "-e"})
CONFIG_VALUED = frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment",
                           "--value"})
UNSURE = re.compile(r"[$`*?\[{]")  # a word whose text is not what runs
PYTHON = re.compile(r"python[0-9.]*")


def refusal(line: str, aliases: Mapping[str, str] | None = None) -> str | None:
    """Why an agent's shell call may not run ``line`` (None: it may)."""
    try:
        found = commands(line, aliases)
    except Unparseable as e:
        return (f"gitwal cannot read this command line as a shell would ({e.reason}), so it "
                "cannot tell that it does not approve a step or change gitwal's settings")
    in_git_dir = any(c.argv[:1] in (("cd",), ("pushd",)) and any(
        ".git" in a for a in c.argv[1:]) for c in found)
    for c in found:
        why = _decision(c) or _config(c) or _files(c, in_git_dir)
        if why:
            return why
    return None


def _gitwal_words(c: Command) -> Sequence[str] | None:
    """The words after ``git wal`` (or ``git-wal``, ``python -m gitwal``)."""
    a = c.argv
    if a[:2] == ("git", "wal"):
        return a[2:]
    if a[:1] == ("git-wal",):
        return a[1:]
    if a and PYTHON.fullmatch(a[0]):
        for k, w in enumerate(a[1:], 1):
            if w == "-m" and a[k + 1:k + 2] == ("gitwal",):
                return a[k + 2:]
            if w in ("-mgitwal",):
                return a[k + 1:]
            if not w.startswith("-"):
                return None
    return None


def _decision(c: Command) -> str | None:
    words = _gitwal_words(c)
    if words is None:
        return None
    sub = next((w for w in words if not w.startswith("-")), "")
    if sub in DECISIONS:
        return f"`git wal {sub}` records a person's decision, never the model's"
    if UNSURE.search(sub):
        return f"the git wal command {sub!r} is known only when it runs"
    return None


def _config(c: Command) -> str | None:
    if c.argv[:2] != ("git", "config"):
        return None
    args = c.argv[2:]
    if any(a in ("-e", "--edit") for a in args):
        return "`git config --edit` may change any setting, gitwal's included"
    positionals: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in CONFIG_VALUED:
            skip = True
        elif not a.startswith("-"):
            positionals.append(a)
    if positionals[:1] == ["edit"]:
        return "`git config edit` may change any setting, gitwal's included"
    reading = any(a in CONFIG_READS for a in args) or positionals[:1] in (["get"], ["list"])
    written = (any(a.split("=")[0] in CONFIG_WRITE_MODES for a in args)
               or positionals[:1] in ([w] for w in CONFIG_WRITES) or len(positionals) > 1)
    if reading or not written:
        return None
    for p in positionals:
        key = p.lower()
        if key == "wal" or key.startswith(("wal.", "include")):
            return f"`git config ... {p}` changes gitwal's settings (wal.*) or what git's " \
                   "config includes"
        if UNSURE.search(p):
            return f"the git config key {p!r} is known only when it runs"
    return None


def config_file(path: str) -> bool:
    """Whether ``path`` (as written) names a git config file or gitwal's secret."""
    p = path.rstrip("/")
    base = os.path.basename(p)
    return (base in (".gitconfig", "gitconfig", "config.worktree")
            or p.endswith(("/.git/config", "/git/config")) or p in (".git/config",)
            or "wal/secret" in p)


def _files(c: Command, in_git_dir: bool) -> str | None:
    def named(t: str) -> bool:
        return config_file(t) or (in_git_dir and os.path.basename(t.rstrip("/")) == "config")

    for r in c.redirects:
        if (r.writes or "wal/secret" in r.target.text) and named(r.target.text):
            return f"it writes {r.target.text!r}, a git config file or gitwal's secret"
    if c.argv and c.argv[0] in READERS:
        hit = next((w.text for w in c.words[1:] if "wal/secret" in w.text), None)
    else:
        hit = next((w.text for w in c.words[1:] if named(w.text)), None)
    if hit is not None:
        return f"it names {hit!r}, a git config file or gitwal's secret"
    return None
