"""The order check of `git wal verify --all`: are the runs' logs one serializable
history, and does the branch hold what that order leaves (docs/verify.md)?

Every selected run's committed steps are put in one order (gitwal/together/order.py,
from the runs' common base). Each fork and cycle is a failure of every run
it names, at the step's LSN. Then the branch tip (``--branch``, else HEAD):
a step is *on the tip* when a checkpoint of its run covering it is the tip
or an ancestor of it. For each path, the last step in the order that is on
the tip must not be undone there: the tip holding the state some earlier
step of the order gave the path means a later change was lost (a merge that
kept one agent's version, say). A state no step gave is the branch check's
to name (unlogged); steps not yet behind a checkpoint on the tip are not
compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pygit2

from ..base.ids import Lsn
from ..log.segments import Entry, Failure
from ..records.model import Checkpoint, Plan
from ..together.order import Step, common_base, derive, state_in, steps_of
from ..worktree.treeread import tree_state
from .replay import short


@dataclass(frozen=True)
class Lane:
    run: str
    plan: Plan | None
    history: Sequence[Entry]


def order_failures(repo: pygit2.Repository, lanes: Sequence[Lane],
                   tip: pygit2.Commit | None, tip_name: str) -> list[Failure]:
    """Failures of the runs in ``lanes`` taken together (each names its run)."""
    base = common_base(repo, (lane.plan.base for lane in lanes if lane.plan is not None))
    times: dict[str, int] = {}

    def at(commit: str) -> int:
        if commit not in times:
            found = repo.get(commit)
            times[commit] = found.commit_time if isinstance(found, pygit2.Commit) else 0
        return times[commit]

    steps = [steps_of(repo, lane.run, ((e.record, at(e.commit)) for e in lane.history))
             for lane in lanes]
    ordered, conflicts = derive(steps, state_in(repo, base))
    out = [Failure(run, "order", f"{c.kind}: {c.detail}", Lsn(lsn))
           for c in conflicts for run, lsn in c.steps]
    if tip is not None:
        out += _undone_on(repo, ordered, _on_tip(repo, lanes, tip), tip, tip_name)
    return out


def _on_tip(repo: pygit2.Repository, lanes: Sequence[Lane],
            tip: pygit2.Commit) -> dict[str, int]:
    """Per run, the highest LSN a checkpoint on ``tip`` (or behind it) covers."""
    covered: dict[str, int] = {}
    for lane in lanes:
        for e in lane.history:
            r = e.record
            if not isinstance(r, Checkpoint) or r.covers <= covered.get(lane.run, 0):
                continue
            try:
                on = r.git == str(tip.id) or repo.descendant_of(tip.id, pygit2.Oid(hex=r.git))
            except (ValueError, pygit2.GitError):
                on = False  # a checkpoint commit that is not here: the objects check says so
            if on:
                covered[lane.run] = r.covers
    return covered


def _undone_on(repo: pygit2.Repository, ordered: Sequence[Step], covered: dict[str, int],
               tip: pygit2.Commit, tip_name: str) -> list[Failure]:
    chains: dict[str, list[tuple[str, Step]]] = {}  # path -> (state left, by), in order
    last_on: dict[str, int] = {}  # path -> index in its chain of the last step on the tip
    for s in ordered:
        for c in s.changes:
            chain = chains.setdefault(c.path, [])
            chain.append((c.after, s))
            if int(s.lsn) <= covered.get(s.run, 0):
                last_on[c.path] = len(chain) - 1
    first_pre: dict[str, str] = {}  # path -> the pre of the first step on it, in one pass
    for s in ordered:
        for c in s.changes:
            first_pre.setdefault(c.path, c.before)
    out = []
    tree = str(tip.tree_id)
    for path, i in sorted(last_on.items()):
        chain = chains[path]
        holds = tree_state(repo, tree, path)
        if any(state == holds for state, _by in chain[i:]):
            continue
        before = [by for state, by in chain[:i] if state == holds]
        if before or holds == first_pre.get(path):
            lost = chain[i][1]
            out.append(Failure(
                lost.run, "order",
                f"{path} on {tip_name} ({short(str(tip.id))}) holds "
                + (f"what run {before[-1].run} LSN {before[-1].lsn} left"
                   if before else "its state before every step")
                + f", though run {lost.run} LSN {lost.lsn}, later in the one order, changed "
                "it and is on that branch: its change was lost (a merge that kept another "
                "run's version?)", lost.lsn))
    return out

