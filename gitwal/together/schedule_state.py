"""What the schedule search (schedule.py) works on: which steps carry each
(path, state), and one point of the search, changed in place.

Invariant: a :class:`Walk`'s ``key`` is always the sum, modulo 2**128, of a
digest of each (lane, position) and each (path, state) it holds, kept up to
date with each change, so a point is remembered by 128 bits, never by a copy
of its states. Every look, application and taking back is counted in
``StepPaths.work``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Lane", "StepPaths", "Walk"]

_MOD = 1 << 128


class _Change(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def before(self) -> str: ...
    @property
    def after(self) -> str: ...


class _Step(Protocol):
    @property
    def changes(self) -> Sequence[_Change]: ...
    @property
    def at(self) -> int: ...


Lane = Sequence[_Step]  # one run's committed steps, in LSN order


@dataclass
class StepPaths:
    """Which steps carry each (path, state), to tell a state the order has
    already passed (a stale read) from one a later step produces (wait for it);
    counts the work it does."""

    lanes: Sequence[Lane]
    work: int = 0
    # (path, state) -> {lane: first index of a step carrying it, as pre or post}
    seen: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    # (path, state) -> {lane: last index of a step producing it}
    made: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for li, lane in enumerate(self.lanes):
            for si, s in enumerate(lane):
                for c in s.changes:
                    for key in ((c.path, c.before), (c.path, c.after)):
                        self.seen.setdefault(key, {}).setdefault(li, si)
                    self.made.setdefault((c.path, c.after), {})[li] = si

    def passed(self, key: tuple[str, str], pos: Sequence[int]) -> bool:
        carriers = self.seen.get(key, {})
        self.work += len(carriers)
        return any(si < pos[li] for li, si in carriers.items())

    def coming(self, key: tuple[str, str], pos: Sequence[int], lane: int) -> bool:
        makers = self.made.get(key, {})
        self.work += len(makers)
        return any(si >= pos[li] and li != lane for li, si in makers.items())

    def fits(self, lane: int, pos: Sequence[int], state: Mapping[str, str],
             guess: bool = False) -> bool:
        """Whether the next step of ``lane`` may run now, the paths holding ``state``:
        each path it changes holds its pre, or has no state yet and no other
        run's later step makes its pre, or its pre is a state no step gave it
        and the order has not passed (an unlogged edit). With ``guess`` (tried
        only after every step that fits without), a path with no state yet takes
        any (the other run's step put it back), and a path already holding the
        step's post takes it (the same change seen twice: nothing is lost)."""
        for c in self.lanes[lane][pos[lane]].changes:
            self.work += 1
            now, key = state.get(c.path), (c.path, c.before)
            if now == c.before or (now is None and (guess or not self.coming(key, pos, lane))):
                continue
            if guess and now == c.after:
                continue  # the path holds the step's result already: nothing is lost
            if now is None or self.passed(key, pos) or self.made.get(key):
                return False
        return True

    def live(self, pos: Sequence[int]) -> list[int]:
        """The lanes with a step left, their next step oldest first (append time,
        then lane: run id order)."""
        self.work += len(self.lanes)
        return sorted((i for i, lane in enumerate(self.lanes) if pos[i] < len(lane)),
                      key=lambda i: (self.lanes[i][pos[i]].at, i))


def _digest(*parts: str) -> int:
    data = "\0".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


class Walk:
    """The positions and path states of one point of the search, changed in
    place, and their key: the sum of a digest of each (lane, position) and
    each (path, state) held, modulo 2**128 (a path with no state adds none)."""

    def __init__(self, paths: StepPaths, first: Mapping[str, str]) -> None:
        self.paths = paths
        self.pos = [0] * len(paths.lanes)
        self.state = dict(first)
        self._memo: dict[tuple[str, str], int] = {}  # one entry per pair seen: O(changes)
        # per lane, the digest of each position it can be at: O(steps)
        self._at = [[_digest("lane", str(i), str(n)) for n in range(len(lane) + 1)]
                    for i, lane in enumerate(paths.lanes)]
        self.key = (sum(self._of(p, s) for p, s in self.state.items())
                    + sum(at[0] for at in self._at)) % _MOD

    def _of(self, path: str, state: str) -> int:
        got = self._memo.get((path, state))
        if got is None:
            got = self._memo[(path, state)] = _digest("path", path, state)
        return got

    def _set(self, path: str, now: str | None) -> None:
        old = self.state.get(path)
        delta = (0 if now is None else self._of(path, now)) - \
            (0 if old is None else self._of(path, old))
        self.key = (self.key + delta) % _MOD
        if now is None:
            del self.state[path]
        else:
            self.state[path] = now

    def _move(self, lane: int, by: int) -> None:
        at, digests = self.pos[lane], self._at[lane]
        self.key = (self.key + digests[at + by] - digests[at]) % _MOD
        self.pos[lane] = at + by

    def apply(self, lane: int) -> list[tuple[str, str | None]]:
        """Apply ``lane``'s next step; what :meth:`undo` needs to take it back."""
        changes = self.paths.lanes[lane][self.pos[lane]].changes
        self.paths.work += len(changes)
        back = []
        for c in changes:
            back.append((c.path, self.state.get(c.path)))
            self._set(c.path, c.after)
        self._move(lane, 1)
        return back

    def undo(self, lane: int, back: list[tuple[str, str | None]]) -> None:
        self.paths.work += len(back)
        self._move(lane, -1)
        for path, old in reversed(back):
            self._set(path, old)
