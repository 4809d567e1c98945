"""One order of every run's committed steps, from the hashes the records carry
(docs/agents-together.md, "One order"; `git wal order`).

Nodes are the committed steps of the runs; edges are (a) each run's LSN order
and (b) for every path, "the step whose pre-state on the path is S comes
after a step of another run whose post-state there is S". A topological sort
gives the order; ties are broken by run id, then LSN, so it is the same on
every machine. What cannot be ordered is reported, never guessed:

* a **fork**: steps of two runs changed a path from the same state (each
  began from what the other did not see: one update may have been lost);
* a **cycle**: the constraints contradict each other (the steps are listed,
  then placed by run and LSN). A run that puts back a state another run had
  (a revert) looks the same to the states alone: it is reported, not guessed.

Replaying the steps' post-states in the order must leave every path they
touched as the working tree holds it; the paths where it does not are named.
Nothing is written: the log is read, the tree is only hashed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from .history import Change, changes_of
from .ids import Lsn, RunId
from .log.store import Store
from .records.model import Abort, Commit, Intent
from .worktree.overwrite import found
from .worktree.tree import Worktree

__all__ = ["Conflict", "Order", "Step", "derive", "order", "steps_of"]


@dataclass(frozen=True)
class Step:
    run: str
    lsn: Lsn
    tool: str
    changes: tuple[Change, ...]
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


def steps_of(repo: pygit2.Repository, run: str) -> list[Step]:
    """The committed steps of ``run``, in LSN order."""
    opened: dict[int, Intent] = {}
    out: list[Step] = []
    for rec in Store(repo, RunId(run)).records():
        if isinstance(rec, Intent):
            opened[rec.lsn] = rec
        elif isinstance(rec, Abort):
            opened.pop(rec.intent, None)
        elif isinstance(rec, Commit) and (intent := opened.pop(rec.intent, None)):
            out.append(Step(run, intent.lsn, intent.tool, changes_of(repo, intent, rec),
                            rec.claimed))
    return out


def derive(runs: Iterable[Sequence[Step]]) -> tuple[tuple[Step, ...], tuple[Conflict, ...]]:
    """The order of the steps of ``runs`` (each in LSN order), and its conflicts."""
    nodes = [s for steps in runs for s in steps]
    edges: list[set[int]] = [set() for _ in nodes]
    into = [0] * len(nodes)

    def edge(a: int, b: int) -> None:
        if b not in edges[a] and a != b:
            edges[a].add(b)
            into[b] += 1

    by_run: dict[str, list[int]] = {}
    for i, s in enumerate(nodes):
        by_run.setdefault(s.run, []).append(i)
    for members in by_run.values():
        for a, b in itertools.pairwise(members):
            edge(a, b)
    produced: dict[tuple[str, str], list[int]] = {}
    began: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(nodes):
        for c in s.changes:
            produced.setdefault((c.path, c.after), []).append(i)
            began.setdefault((c.path, c.before), []).append(i)
    for (path, state), starts in began.items():
        for b in starts:
            for a in produced.get((path, state), ()):
                if nodes[a].run != nodes[b].run:
                    edge(a, b)
    conflicts = [Conflict("fork", tuple(nodes[i].key for i in starts), path,
                          f"{path}: changed from the same state by "
                          + " and ".join(f"run {nodes[i].run} LSN {nodes[i].lsn}"
                                         for i in starts))
                 for (path, _state), starts in sorted(began.items())
                 if len({nodes[i].run for i in starts}) > 1]
    ready = [(nodes[i].run, int(nodes[i].lsn), i) for i in range(len(nodes)) if into[i] == 0]
    heapq.heapify(ready)
    ordered: list[int] = []
    while ready:
        _run, _lsn, i = heapq.heappop(ready)
        ordered.append(i)
        for j in edges[i]:
            into[j] -= 1
            if into[j] == 0:
                heapq.heappush(ready, (nodes[j].run, int(nodes[j].lsn), j))
    left = sorted((i for i in range(len(nodes)) if into[i] > 0), key=lambda i: nodes[i].key)
    if left:
        conflicts.append(Conflict("cycle", tuple(nodes[i].key for i in left), None,
                                  "these steps' path histories contradict each other "
                                  "(or one put back a state another had): "
                                  + ", ".join(f"run {nodes[i].run} LSN {nodes[i].lsn}"
                                              for i in left)))
        ordered += left
    return tuple(nodes[i] for i in ordered), tuple(conflicts)


def order(repo: pygit2.Repository, runs: Sequence[str], wt: Worktree | None = None) -> Order:
    """The order of ``runs``' committed steps; with ``wt``, the replay check."""
    steps, conflicts = derive(steps_of(repo, r) for r in runs)
    differ: list[str] = []
    if wt is not None:
        last: dict[str, str] = {}
        for s in steps:
            for c in s.changes:
                last[c.path] = c.after
        differ = [p for p, state in sorted(last.items()) if found(wt, p) != state]
    return Order(steps, conflicts, tuple(differ))
