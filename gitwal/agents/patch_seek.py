"""Where an ``apply_patch`` hunk applies: the line search Codex itself does.

gitwal predicts a patched file's post-image before Codex applies the patch,
so it must find each hunk exactly where Codex will, or the prediction
misses (docs/agents.md, "Prediction misses"). Codex (0.169.0) looks for a
hunk's old lines in four passes, each from the same start line, the first
that matches winning:

1. exactly;
2. ignoring trailing white space;
3. ignoring surrounding white space;
4. ignoring surrounding white space and typographic punctuation: the dashes
   U+2010..U+2015 and U+2212 read as ``-``, the quotes U+2018..U+201B as
   ``'`` and U+201C..U+201F as ``"``, and no-break and other fixed-width
   spaces (U+00A0, U+2002..U+200A, U+202F, U+205F, U+3000) as a space.

A hunk marked ``*** End of File`` is tried only at the very end of the
file. These rules are Codex's, written here from its documented behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

_PUNCTUATION = str.maketrans(
    {**dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
     **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
     **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
     **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                     "\u202f\u205f\u3000", " ")})


def _plain(s: str) -> str:
    return s.strip().translate(_PUNCTUATION)


# Codex trims Unicode White_Space; Python's strip also takes the four ASCII
# separators U+001C..U+001F, which no source line holds in practice.
PASSES: tuple[Callable[[str], str], ...] = (
    lambda s: s, str.rstrip, str.strip, _plain)


def seek(lines: Sequence[str], pattern: Sequence[str], start: int, at_end: bool) -> int | None:
    """The index in ``lines`` where ``pattern`` matches, at or after ``start`` (only
    at the end with ``at_end``); None when no pass finds it."""
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    last = len(lines) - len(pattern)
    first = last if at_end else start
    for norm in PASSES:
        want = [norm(p) for p in pattern]
        for at in range(first, last + 1):
            if all(norm(lines[at + k]) == w for k, w in enumerate(want)):
                return at
    return None
