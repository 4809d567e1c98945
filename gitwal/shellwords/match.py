"""Shell-style patterns (``wal.irreversible``) matched against what a line runs.

A pattern (``fnmatch``: ``git push*``) matches a line when it matches the
line as written, or any one command the line runs (lex.py, unwrap.py), as
written after its wrappers or as normalized (``git -C . --no-pager push``
is ``git push``). A line this reader cannot follow matches: it may run
anything.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .unwrap import commands
from .word import Unparseable

__all__ = ["Hit", "first_match"]


@dataclass(frozen=True)
class Hit:
    pattern: str  # the pattern that matched; the first pattern when the line is unreadable
    unreadable: str = ""  # why the line cannot be read, when that is why it matches

    @property
    def why(self) -> str:
        if self.unreadable:
            return (f"gitwal cannot read it as a shell would ({self.unreadable}), so it "
                    f"counts as matching wal.irreversible {self.pattern!r}")
        return f"wal.irreversible {self.pattern!r}"


def first_match(line: str, patterns: Sequence[str],
                aliases: Mapping[str, str] | None = None) -> Hit | None:
    """The first pattern the line, or a command it runs, matches (None: none does)."""
    if not patterns:
        return None
    text = line.strip()
    for p in patterns:
        if fnmatch.fnmatchcase(text, p):
            return Hit(p)
    try:
        found = commands(line, aliases)
    except Unparseable as e:
        return Hit(patterns[0], e.reason)
    for p in patterns:
        for c in found:
            if c.words and (fnmatch.fnmatchcase(c.text, p) or
                            fnmatch.fnmatchcase(c.written, p)):
                return Hit(p)
    return None
