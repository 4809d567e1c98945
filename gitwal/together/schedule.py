"""The schedule of one order (gitwal/together/order.py; docs/agents-together.md, "One
order", points 3 and 4): which run's next step comes next, found depth first
over (positions, path states), then placed one step at a time if the search
finds no complete schedule.

A log is data another clone may have pushed, so the cost is bounded by the
input, never by what it contains: one map of path states is changed in place
as a step is applied and changed back as it is taken back (memory O(steps +
paths), never a copy per node); a node the search gave up on is remembered
by a 128-bit key kept up to date with each change (positions and states
hashed, summed), not by its states; and the work is counted, in units of one
path change looked at, applied or taken back, or one run looked at. The
search stops at :data:`SEARCH_BUDGET` + 4 x steps schedule extensions or
:data:`WORK_BUDGET` + :data:`WORK_PER_CHANGE` x path changes units, whichever
comes first; the placement that follows has as many units again, and what
it has not placed when they are spent is placed oldest first unchecked (the
order's conflict pass names what does not fit). The path states and the key
of each point are schedule_state.py.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .schedule_state import Lane, StepPaths, Walk

__all__ = ["SEARCH_BUDGET", "WORK_BUDGET", "WORK_PER_CHANGE", "Schedule", "schedule"]

SEARCH_BUDGET = 20_000  # schedule extensions tried (+ 4 per step) before placing
WORK_BUDGET = 2_000_000  # units of work of the search (+ WORK_PER_CHANGE per path change)
WORK_PER_CHANGE = 64


@dataclass
class Schedule:
    lanes: list[int]  # the lane of each step, in order
    complete: bool  # the search found it: every step fits where it is
    work: int = 0  # units of work spent (search and placement)
    unchecked: int = 0  # steps placed oldest first once the work budget was spent


class _Node:
    """Where the search is at one point of its path: the phase (0: steps that
    fit, 1: those that fit only as a guess), the next of the live lanes to
    try, and those lanes while the point is the one being tried (dropped when
    the search goes deeper, so only one such list is held)."""

    __slots__ = ("live", "phase", "tried")

    def __init__(self) -> None:
        self.phase, self.tried = 0, 0
        self.live: list[int] | None = None


def _next(paths: StepPaths, walk: Walk, node: _Node) -> int | None:
    """The next lane to try at ``node``: the fitting ones oldest first, then
    the ones that fit only as a guess."""
    if node.live is None:
        node.live = paths.live(walk.pos)
    live = node.live
    while node.phase < 2:
        guess = node.phase == 1
        while node.tried < len(live):
            i = live[node.tried]
            node.tried += 1
            if guess and paths.fits(i, walk.pos, walk.state):
                continue  # tried in the first phase
            if paths.fits(i, walk.pos, walk.state, guess):
                return i
        node.phase, node.tried = node.phase + 1, 0
    return None


def _search(paths: StepPaths, first: Mapping[str, str], limit: int,
            ) -> tuple[list[int] | None, list[int]]:
    """A schedule in which every step finds what it began from, depth first,
    each (positions, states) point tried once; None when none is found within
    the budgets. Also the longest prefix reached, for the placement."""
    steps = sum(len(lane) for lane in paths.lanes)
    tries_left = SEARCH_BUDGET + 4 * steps
    walk = Walk(paths, first)
    nodes = [_Node()]
    chosen: list[int] = []  # the lane of each step placed
    backs: list[list[tuple[str, str | None]]] = []  # what taking each back needs
    deepest: list[int] = []
    failed: set[int] = set()
    while nodes:
        if len(chosen) == steps:
            return chosen, []
        i = _next(paths, walk, nodes[-1])
        if i is not None:
            tries_left -= 1
        if i is None or tries_left < 0 or paths.work > limit:
            # The deepest point is always left this way: keep the first one reached.
            if len(chosen) > len(deepest):
                paths.work += len(chosen)
                deepest = list(chosen)
            if i is not None:
                return None, deepest
            failed.add(walk.key)
            nodes.pop()
            if chosen:
                walk.undo(chosen.pop(), backs.pop())
            continue
        back = walk.apply(i)
        if walk.key in failed:
            walk.undo(i, back)
            continue
        chosen.append(i)
        backs.append(back)
        nodes[-1].live = None
        nodes.append(_Node())
    return None, deepest


def _place(paths: StepPaths, first: Mapping[str, str], prefix: list[int],
           limit: int) -> tuple[list[int], int]:
    """A schedule when no step-by-step consistent one was found: the longest
    consistent prefix found, then one step at a time a step that fits (oldest
    first); else one whose pre no later step of another run produces (waiting
    would not help); else the oldest. Past ``limit`` units of work, the rest
    oldest first, unchecked (also how many)."""
    walk = Walk(paths, first)
    for i in prefix:
        walk.apply(i)
    out = list(prefix)
    lanes, pos = paths.lanes, walk.pos
    while paths.work <= limit:
        live = paths.live(pos)
        if not live:
            return out, 0
        pick = next((i for guess in (False, True) for i in live
                     if paths.fits(i, pos, walk.state, guess)), None)
        if pick is None:
            pick = next((i for i in live if not any(
                paths.coming((c.path, c.before), pos, i)
                for c in lanes[i][pos[i]].changes)), live[0])
        walk.apply(pick)
        out.append(pick)
    # The budget is spent: merge the lanes by their steps' times, O(steps log lanes).
    heap = [(lanes[i][pos[i]].at, i) for i in range(len(lanes)) if pos[i] < len(lanes[i])]
    heapq.heapify(heap)
    rest = 0
    while heap:
        _at, i = heapq.heappop(heap)
        out.append(i)
        rest += 1
        pos[i] += 1
        if pos[i] < len(lanes[i]):
            heapq.heappush(heap, (lanes[i][pos[i]].at, i))
    return out, rest


def schedule(lanes: Sequence[Lane], first: Mapping[str, str]) -> Schedule:
    """The schedule of ``lanes`` from the path states ``first`` (docstring above)."""
    paths = StepPaths(lanes)
    changes = sum(len(s.changes) for lane in lanes for s in lane)
    limit = WORK_BUDGET + WORK_PER_CHANGE * changes
    found, prefix = _search(paths, first, limit)
    if found is not None:
        return Schedule(found, True, paths.work)
    spent = paths.work
    placed, rest = _place(paths, first, prefix, spent + limit)
    return Schedule(placed, False, paths.work, rest)
