"""The ledger: what the log says each path should hold now.

One fold, used by every reader that asks it (recovery's drift, checkpoint,
seal, verify, the agent hooks' expectation). It starts from a base tree (the
newest checkpoint's, else the base commit's) and folds records in LSN order:

* a committed file step gives its targets the commit's (observed) post ids;
* a committed exec step gives every path its pre and post trees differ in
  that path's state in the post tree;
* with ``Rules.unlogged``, an ``unlogged`` record gives its paths the states
  it observed;
* with ``Rules.open_pre``, an open file intent's targets are expected at
  their pre-images while it stays open (a view: it is not folded in, so the
  commit or abort that closes it decides, as without the rule);
* a ``checkpoint`` record starts over from its tree;
* aborts, plans and seals set nothing (an abort leaves its targets as the
  log had them).

A path the fold has not set is expected as in the base tree. Each state
carries the LSN that set it: the intent of a committed step, or the
``unlogged`` record.

A closing the fold cannot apply (it names no open intent; a file commit's
post list does not fit the targets; an exec commit's trees are missing) is a
damaged log: :class:`CorruptLog` by default, skipped and listed in
``Ledger.skipped`` with ``Rules.lenient`` (`git wal verify`, whose other
checks name the defect).

Invariant: folding records in one go and folding them in any chunks give the
same :class:`Ledger` (``advance`` continues from a cached value; records at
or before ``Ledger.last`` are already in it and are skipped).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import pygit2

from ..base.errors import CorruptLog
from ..base.ids import Lsn, TreeId
from ..log.appends import UNTRUSTED
from ..records.model import Abort, Checkpoint, Commit, Intent, Plan, Record, Unlogged
from ..worktree.tree import Worktree
from ..worktree.treeread import tree_state

Source = Literal["step", "exec", "unlogged", "pre"]
STEP: Source = "step"  # a committed file step (lsn: its intent)
EXEC: Source = "exec"  # a committed exec step (lsn: its intent)
UNLOGGED: Source = "unlogged"  # an unlogged record (lsn: the record)
PRE: Source = "pre"  # an open file intent's pre-image (lsn: the intent)


@dataclass(frozen=True)
class Held:
    """The state the log gives one path, and which record gave it."""

    state: str  # object id, or ABSENT
    lsn: Lsn
    source: Source


@dataclass(frozen=True)
class Rules:
    """Which records count, and what a defect does."""

    unlogged: bool = False  # unlogged records' observed states count
    open_pre: bool = False  # open file intents' targets are expected at their pre
    lenient: bool = False  # skip a closing the fold cannot apply (else CorruptLog)


COMMITTED = Rules()  # what committed steps left (recovery's drift, checkpoint gaps)
EXPLAINED = Rules(unlogged=True)  # ... or an unlogged record saw (seal, agent hooks)


def base_tree(repo: pygit2.Repository, first: Record) -> TreeId | None:
    """The tree a segment starting with ``first`` starts from: a checkpoint's
    tree, else (``first`` is the plan) the base commit's; None when that
    object is missing, or when ``first`` is neither."""
    if isinstance(first, Checkpoint):
        return TreeId(first.tree) if isinstance(repo.get(first.tree), pygit2.Tree) else None
    if isinstance(first, Plan):
        base = repo.get(first.base)
        return TreeId(str(base.tree_id)) if isinstance(base, pygit2.Commit) else None
    return None


@dataclass(frozen=True)
class Ledger:
    """The fold's value after ``last``; immutable, so it may be cached and continued."""

    rules: Rules
    base: TreeId | None  # None: the tree it starts from is missing (or not known)
    checkpoint: Lsn | None  # the checkpoint whose tree ``base`` is (None: the base commit)
    last: Lsn  # the newest LSN folded in (0: none)
    held: Mapping[str, Held] = field(default_factory=lambda: MappingProxyType({}))
    open: tuple[Intent, ...] = ()  # intents not closed yet, oldest first
    skipped: tuple[Lsn, ...] = ()  # closings not applied (Rules.lenient)

    @classmethod
    def start(cls, repo: pygit2.Repository, first: Record | None,
              rules: Rules = COMMITTED) -> Ledger:
        """Nothing folded yet, from the tree a segment starting with ``first`` starts from."""
        if first is None:
            return cls(rules, None, None, Lsn(0))
        if isinstance(first, Checkpoint):
            return cls(rules, base_tree(repo, first), first.lsn, first.lsn)
        return cls(rules, base_tree(repo, first), None, Lsn(0))

    def advance(self, trees: Worktree, records: Iterable[Record]) -> Ledger:
        """This ledger with ``records`` folded in (O(paths held) plus the new records)."""
        return Fold(trees, self).feed_all(records).ledger()

    def state(self, repo: pygit2.Repository, path: str) -> str | None:
        """What ``path`` should hold: its held state, else its state in the base
        tree (None: the base tree is missing)."""
        if self.rules.open_pre:
            pre = [h for p, h in _pre_images(self.open) if p == path]
            if pre:
                return pre[-1].state
        held = self.held.get(path)
        if held is not None:
            return held.state
        return None if self.base is None else tree_state(repo, self.base, path)

    def expected(self) -> dict[str, str]:
        """path -> state for every path the records set (the rest: as in ``base``)."""
        out = {path: h.state for path, h in self.held.items()}
        if self.rules.open_pre:
            out.update((p, h.state) for p, h in _pre_images(self.open))
        return out

    def require_base(self) -> TreeId:
        """``base``, or CorruptLog naming what is missing."""
        if self.base is None:
            where = (f"the tree of checkpoint LSN {self.checkpoint}" if self.checkpoint
                     else "the run's base commit")
            raise CorruptLog(f"{where} is missing from the repository: what the log "
                             "expects of the tree cannot be computed",
                             "fetch the missing objects (or begin a new run)")
        return self.base


def _pre_images(open_: Iterable[Intent]) -> Iterator[tuple[str, Held]]:
    for intent in open_:
        if intent.tool != "exec":
            for path, pre in zip(intent.target, intent.pre, strict=True):
                yield path, Held(pre, intent.lsn, PRE)


class Fold:
    """A running fold, one record at a time: what :meth:`Ledger.advance` does,
    for readers that look between records (verify). Mutable; ``ledger()``
    freezes a copy."""

    def __init__(self, trees: Worktree, start: Ledger) -> None:
        self.trees = trees
        self.repo: pygit2.Repository = trees.repo
        self.rules = start.rules
        self.base = start.base
        self.checkpoint = start.checkpoint
        self.last = start.last
        self.held: dict[str, Held] = dict(start.held)
        self.open: dict[int, Intent] = {i.lsn: i for i in start.open}
        self.skipped: list[Lsn] = list(start.skipped)

    def feed_all(self, records: Iterable[Record]) -> Fold:
        for rec in records:
            self.feed(rec)
        return self

    def feed(self, rec: Record) -> list[tuple[str, Held]]:
        """Fold ``rec`` in; return the states it set, in order (none for a
        record at or before ``last``: it is folded in already)."""
        if rec.lsn <= self.last:
            return []
        self.last = rec.lsn
        if isinstance(rec, Intent):
            self.open[rec.lsn] = rec
            return []
        if isinstance(rec, Abort):
            self.open.pop(rec.intent, None)
            return []
        if isinstance(rec, Checkpoint):
            # Its tree is the log's word for every path from here on.
            is_tree = isinstance(self.repo.get(rec.tree), pygit2.Tree)
            self.base = TreeId(rec.tree) if is_tree else None
            self.checkpoint = rec.lsn
            self.held.clear()
            return []
        if isinstance(rec, Unlogged):
            if not self.rules.unlogged:
                return []
            out = [(p, Held(s, rec.lsn, UNLOGGED))
                   for p, s in zip(rec.paths, rec.observed, strict=True)]
        elif isinstance(rec, Commit):
            out = self._committed(rec)
        else:  # plan, seal
            return []
        self.held.update(out)
        return out

    def _committed(self, rec: Commit) -> list[tuple[str, Held]]:
        intent = self.open.pop(rec.intent, None)
        if intent is None:
            return self._defect(rec, f"the commit closes LSN {rec.intent}, which is not an "
                                "open intent of the records read")
        if intent.tool != "exec":
            if len(rec.post) != len(intent.target):
                return self._defect(rec, f"the commit records {len(rec.post)} post id(s) for "
                                    f"the {len(intent.target)} target(s) of intent LSN "
                                    f"{intent.lsn}")
            return [(p, Held(s, intent.lsn, STEP))
                    for p, s in zip(intent.target, rec.post, strict=True)]
        trees = (intent.pre[0], rec.post[0]) if len(rec.post) == 1 else ()
        if not trees or not all(isinstance(self.repo.get(t), pygit2.Tree) for t in trees):
            return self._defect(rec, f"the commit of exec intent LSN {intent.lsn} does not "
                                "name one post tree, or its pre or post tree is missing")
        pre, post = TreeId(trees[0]), TreeId(trees[1])
        return [(p, Held(tree_state(self.repo, post, p), intent.lsn, EXEC))
                for p in self.trees.changed_paths(pre, post)]

    def _defect(self, rec: Commit, why: str) -> list[tuple[str, Held]]:
        if not self.rules.lenient:
            raise CorruptLog(f"run {rec.run} LSN {rec.lsn}: {why}", UNTRUSTED)
        self.skipped.append(rec.lsn)
        return []

    def expected(self) -> dict[str, str]:
        """As :meth:`Ledger.expected`, now."""
        out = {path: h.state for path, h in self.held.items()}
        if self.rules.open_pre:
            out.update((p, h.state) for p, h in _pre_images(self.open.values()))
        return out

    def ledger(self) -> Ledger:
        return Ledger(self.rules, self.base, self.checkpoint, self.last,
                      MappingProxyType(dict(self.held)),
                      tuple(self.open[k] for k in sorted(self.open)), tuple(self.skipped))


def fold(trees: Worktree, records: list[Record], rules: Rules = COMMITTED) -> Ledger:
    """The ledger of a segment (records from its plan or its newest checkpoint)."""
    return Ledger.start(trees.repo, records[0] if records else None, rules).advance(
        trees, records)


class LedgerCache:
    """Ledgers a long-lived process folded, by (repository, run): a hook call
    folds only the records appended since its last call (the hook server).

    A kept ledger is continued only when ``records`` starts with exactly the
    records folded then (the same objects, as the chain reader's segment
    cache hands them out, or equal ones); anything else (a record someone
    meant to append and did not, a checkpoint, a rewritten log) starts the
    fold over. Thread-safe."""

    KEPT = 16

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], tuple[tuple[Record, ...], Ledger]] = {}
        self._guard = threading.Lock()

    def fold(self, trees: Worktree, run: str, records: list[Record], rules: Rules) -> Ledger:
        key = (trees.repo.path, run)
        with self._guard:
            folded, ledger = self._kept.pop(key, ((), None))
        if (ledger is None or ledger.rules != rules or not folded
                or len(folded) > len(records)
                or not all(a is b or a == b for a, b in zip(folded, records[:len(folded)],
                                                                 strict=True))):
            folded, ledger = (), Ledger.start(trees.repo, records[0] if records else None,
                                              rules)
        ledger = ledger.advance(trees, records[len(folded):])
        with self._guard:
            self._kept[key] = (tuple(records), ledger)
            while len(self._kept) > self.KEPT:
                del self._kept[next(iter(self._kept))]  # the least recently used
        return ledger


def changes(trees: Worktree, records: Iterable[Record],
            rules: Rules = COMMITTED) -> Iterator[tuple[str, Held]]:
    """Every state the records set, in log order (several per path, unlike the fold)."""
    running = Fold(trees, Ledger(rules, None, None, Lsn(0)))
    for rec in records:
        yield from running.feed(rec)


__all__ = ["COMMITTED", "EXEC", "EXPLAINED", "PRE", "STEP", "UNLOGGED", "Fold", "Held",
           "Ledger", "LedgerCache", "Rules", "base_tree", "changes", "fold"]
