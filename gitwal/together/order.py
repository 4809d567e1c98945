"""One order of every run's committed steps, from the hashes the records carry
(docs/agents-together.md, "One order", is the normative text; `git wal order`,
`git wal verify --all`).

Each run's committed steps keep their LSN order (a lane); the order is the
first interleaving of the lanes in which every step finds each path it
changes holding the state it began from, starting from the runs' common base
tree: found depth first, the fitting steps tried oldest first (append time,
then run id), so it is the same on every machine. A revert (a step putting
back a state another run's step had replaced) is ordered like any other
step. What no interleaving explains is reported, never guessed:

* a **fork**: a step began from a state another run's step had already moved
  the path away from (both changed it from one state: one update is lost);
* a **cycle**: a step began from a state only a step placed after it wrote.

Replaying the steps' post-states in the order must leave every path they
touched as the working tree holds it; the paths where it does not are named.
Nothing is written: the log is read, the tree is only hashed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from ..base.errors import UnknownRun
from ..base.ids import CommitId, Lsn, RunId
from ..changes.history import Change, changes_of
from ..log.store import Store
from ..records.model import Abort, Commit, Intent, Plan, Record
from ..worktree.overwrite import found
from ..worktree.tree import Worktree
from ..worktree.treeread import tree_state
from .schedule import schedule

__all__ = ["Conflict", "Order", "Step", "common_base", "derive", "order", "since", "steps_of"]


@dataclass(frozen=True)
class Step:
    run: str
    lsn: Lsn
    tool: str
    changes: tuple[Change, ...]
    at: int = 0  # Unix seconds of the append that committed it: a preference only
    # a shell step's paths another live run claimed: (path, run, claim LSN)
    claimed: tuple[tuple[str, str, int], ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.run, int(self.lsn))


@dataclass(frozen=True)
class Conflict:
    kind: str  # "fork" | "cycle"
    steps: tuple[tuple[str, int], ...]  # (run, LSN)
    path: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail,
                "steps": [{"run": r, "lsn": n} for r, n in self.steps]}


@dataclass(frozen=True)
class Order:
    steps: tuple[Step, ...]
    conflicts: tuple[Conflict, ...]
    differ: tuple[str, ...] = ()  # paths the replay leaves otherwise than the tree holds

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.differ

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "steps": [
                    {"run": s.run, "lsn": s.lsn, "tool": s.tool,
                     "paths": sorted({c.path for c in s.changes})} for s in self.steps],
                "conflicts": [c.to_dict() for c in self.conflicts],
                "replay_differs": list(self.differ),
                "claimed": [{"run": s.run, "lsn": s.lsn, "path": p, "claimed_by": r,
                             "claim_lsn": n} for s in self.steps for p, r, n in s.claimed]}


def steps_of(repo: pygit2.Repository, run: str,
             records: Iterable[tuple[Record, int]] | None = None,
             head: str | None = None) -> list[Step]:
    """The committed steps of ``run``, in LSN order, from its live log (or the
    chain at ``head``, a fetched copy's) or from ``records`` read from it,
    each with the time of the append that carried it."""
    if records is None:
        store = Store(repo, RunId(run))
        tip = store.head() if head is None else CommitId(head)
        appends = [] if tip is None else list(store.appends(tip))
        records = ((r, c.commit_time) for c, batch in reversed(appends) for r in batch)
    opened: dict[int, Intent] = {}
    out: list[Step] = []
    for rec, at in records:
        if isinstance(rec, Intent):
            opened[rec.lsn] = rec
        elif isinstance(rec, Abort):
            opened.pop(rec.intent, None)
        elif isinstance(rec, Commit) and (intent := opened.pop(rec.intent, None)):
            out.append(Step(run, intent.lsn, intent.tool, changes_of(repo, intent, rec), at,
                            rec.claimed))
    return out


def common_base(repo: pygit2.Repository, bases: Iterable[str]) -> str | None:
    """The one of ``bases`` (commit ids) every other one is or descends from, if any:
    the tree the order starts from."""
    found = list(dict.fromkeys(bases))
    for cand in found:
        if all(b == cand or _after(repo, b, cand) for b in found):
            return cand
    return None


def _after(repo: pygit2.Repository, commit: str, base: str) -> bool:
    """Whether ``commit`` descends from ``base`` (no: either is not here, as for
    a fetched run whose base commit was not fetched)."""
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=commit), pygit2.Oid(hex=base)))
    except (ValueError, pygit2.GitError):
        return False


def state_in(repo: pygit2.Repository, commit: str | None) -> Callable[[str], str] | None:
    """A path's state in ``commit``'s tree (None: no commit, so no known start)."""
    found = None if commit is None else repo.get(commit)
    if not isinstance(found, pygit2.Commit):
        return None
    tree = str(found.tree_id)
    return lambda path: tree_state(repo, tree, path)


def _conflicts(ordered: Sequence[Step], first: dict[str, str]) -> list[Conflict]:
    """Forks (a step began from a state another run's step had already moved the
    path away from: one update is lost) and cycles (a step began from a state
    that only a step placed after it produces), walking each path's history
    once: O(path changes) with the indexes below, whatever the log holds."""
    history: dict[str, list[tuple[str, Step | None]]] = {  # path -> (state, set by)
        path: [(state, None)] for path, state in first.items()}
    last: dict[str, dict[str, int]] = {  # path -> state -> its last index in the history
        path: {state: 0} for path, state in first.items()}
    later = _Makers(ordered)
    found: dict[tuple[str, str | None, tuple[tuple[str, int], ...]], Conflict] = {}
    for s in ordered:
        for c in s.changes:
            chain = history.setdefault(c.path, [])
            seen = last.setdefault(c.path, {})
            later.passed((c.path, c.after))
            if chain and chain[-1][0] == c.after != c.before:
                continue  # the same change seen twice (two shell steps' snapshots)
            if chain and chain[-1][0] != c.before:
                at = seen.get(c.before)
                mover = None if at is None else chain[at + 1][1]
                maker = later.first_not_of((c.path, c.before), s.run)
                if mover is not None and mover.run != s.run:
                    keys = (mover.key, s.key)
                    found.setdefault(("fork", c.path, keys), Conflict(
                        "fork", keys, c.path,
                        f"{c.path}: changed from the same state by run {mover.run} LSN "
                        f"{mover.lsn} and run {s.run} LSN {s.lsn}"))
                elif at is None and maker is not None:
                    keys = (s.key, maker.key)
                    found.setdefault(("cycle", None, keys), Conflict(
                        "cycle", keys, c.path,
                        f"{c.path}: run {s.run} LSN {s.lsn} began from what run "
                        f"{maker.run} LSN {maker.lsn} wrote, yet the other steps' "
                        "histories place that step later (the runs' orders contradict)"))
            if not chain or chain[-1][0] != c.before:
                seen[c.before] = len(chain)
                chain.append((c.before, None))
            seen[c.after] = len(chain)
            chain.append((c.after, s))
    return list(found.values())


class _Makers:
    """Per (path, state), the steps of the order producing it not yet passed,
    and the first of them not of a given run, each in constant time."""

    def __init__(self, ordered: Sequence[Step]) -> None:
        self.steps: dict[tuple[str, str], list[Step]] = {}
        for s in ordered:
            for c in s.changes:
                self.steps.setdefault((c.path, c.after), []).append(s)
        self.next: dict[tuple[str, str], int] = {}  # the first not passed
        # per list, for each index, the next index holding another run's step
        self.other: dict[tuple[str, str], list[int]] = {}
        for key, made in self.steps.items():
            other = [len(made)] * len(made)
            for k in range(len(made) - 2, -1, -1):
                other[k] = k + 1 if made[k + 1].run != made[k].run else other[k + 1]
            self.other[key] = other

    def passed(self, key: tuple[str, str]) -> None:
        self.next[key] = self.next.get(key, 0) + 1

    def first_not_of(self, key: tuple[str, str], run: str) -> Step | None:
        made = self.steps.get(key, [])
        k = self.next.get(key, 0)
        if k < len(made) and made[k].run == run:
            k = self.other[key][k]
        return made[k] if k < len(made) else None


def derive(runs: Iterable[Sequence[Step]], base: Callable[[str], str] | None = None,
           ) -> tuple[tuple[Step, ...], tuple[Conflict, ...]]:
    """The order of the steps of ``runs`` (each in LSN order), and its conflicts;
    ``base`` gives a path's state before every step (None: the first step on a
    path may begin from any state).

    The order is the first schedule, trying runs by id at every point, in
    which every step finds each path it changes holding the state it began
    from (or a state no step gave the path: an unlogged edit, which `verify`
    notes). A revert (a step putting back an earlier state) is such a
    schedule like any other. Without one, the steps are placed as best they
    fit and every fork and cycle is named.
    """
    lanes = sorted((list(s) for s in runs if s), key=lambda lane: lane[0].run)
    first = ({} if base is None else
             {c.path: base(c.path) for lane in lanes for s in lane for c in s.changes})
    pos = [0] * len(lanes)
    ordered: list[Step] = []
    for i in schedule(lanes, first).lanes:
        ordered.append(lanes[i][pos[i]])
        pos[i] += 1
    return tuple(ordered), tuple(_conflicts(ordered, first))


def order(repo: pygit2.Repository, runs: Sequence[str], wt: Worktree | None = None,
          base: str | None = None, heads: Mapping[str, str] | None = None) -> Order:
    """The order of ``runs``' committed steps from ``base`` (a commit id; default:
    the runs' common plan base); with ``wt``, the replay check. With ``heads``,
    each run is read at the head given (a remote's copy, fetched), not at its
    live ref."""
    at = heads or {}
    if base is None:
        base = common_base(repo, (plan_of(repo, r, at.get(r)).base for r in runs))
    steps, conflicts = derive((steps_of(repo, r, head=at.get(r)) for r in runs),
                              state_in(repo, base))
    differ: list[str] = []
    if wt is not None:
        last: dict[str, str] = {}
        for s in steps:
            for c in s.changes:
                last[c.path] = c.after
        differ = [p for p, state in sorted(last.items()) if found(wt, p) != state]
    return Order(steps, conflicts, tuple(differ))


def plan_of(repo: pygit2.Repository, run: str, at: str | None = None) -> Plan:
    store = Store(repo, RunId(run))
    head = store.head() if at is None else CommitId(at)
    if head is None:
        raise UnknownRun(f"no run {run!r} in this repository", "`git wal runs` lists the runs")
    return store.root_plan(head)


def since(repo: pygit2.Repository, runs: Iterable[str], base: str,
          heads: Mapping[str, str] | None = None) -> list[str]:
    """The runs that began on ``base`` or on a commit after it."""
    out = []
    for r in runs:
        began = plan_of(repo, r, (heads or {}).get(r)).base
        if began == base or _after(repo, began, base):
            out.append(r)
    return out
