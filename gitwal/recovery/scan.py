"""One pass over a run's segment, oldest first: what recovery needs of it.

The scan holds the open intents, one small :class:`~gitwal.recovery.report.Done` per
committed step and the ledger fold (one state per path), never the records:
a 100,000-record run is read in flat memory (docs/performance.md). A
checkpoint met mid-stream starts the segment over (the chain reader's walk
back may stop at an older one: its stop is a hint, chain.Chain.forward).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from ..base.ids import ABSENT, Lsn
from ..changes.ledger import COMMITTED, Fold, Ledger
from ..records.model import Abort, Approval, Checkpoint, Commit, Intent, Record, agent_tool
from ..worktree.overwrite import DIRECTORY, found
from ..worktree.tree import Worktree
from .report import NOT_APPLIED, Decided, Done, Drift, Outcome


class Scan:
    """Feed the segment's records in LSN order (:meth:`feed`), then read."""

    def __init__(self, wt: Worktree, first: Record) -> None:
        self.wt = wt
        self.first = first
        self.last = first
        self.fold = Fold(wt, Ledger.start(wt.repo, first, COMMITTED))
        self.checkpoint: Checkpoint | None = None
        self._targets: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._fed = False
        self._restart()
        self._one(first)

    def _restart(self) -> None:
        self.committed: list[Done] = []
        self.aborted: list[Lsn] = []
        self.last_step: Intent | None = None  # the newest committed intent
        self.last_agent_step: Intent | None = None  # ... that an agent's tool call made
        self.decided: list[Decided] = []  # steps closed by a person's decision
        self.approved: dict[Lsn, Approval] = {}  # irreversible intents a person approved
        self._newest_commit = Lsn(0)  # the newest intent a commit closed
        # Aborts an earlier recovery wrote after every committed intent: the
        # resume point must redo them (see undone()).
        self._undone: list[tuple[Abort, Intent]] = []
        # Restore aborts of shell steps after the last intent (see trailing_restores()).
        self._restores: list[tuple[Abort, Intent]] = []

    def feed(self, records: Iterable[Record]) -> Scan:
        for rec in records:
            self._one(rec)
        return self

    def _one(self, rec: Record) -> None:
        if self._fed and rec.lsn <= self.last.lsn:
            return  # fed already
        self._fed = True
        self.last = rec
        if isinstance(rec, Checkpoint):
            self.checkpoint = rec
            self._restart()
        elif isinstance(rec, Intent):
            self._restores = []
        elif isinstance(rec, Approval):
            self.approved[rec.intent] = rec
        elif isinstance(rec, Commit):
            intent = self.fold.open.get(rec.intent)
            self._decision(rec, intent)
            if intent is not None:
                # Targets repeat (a session edits the same files again and
                # again): one tuple per distinct target, not per step.
                target = self._targets.setdefault(intent.target, intent.target)
                self.committed.append(Done(intent.lsn, sys.intern(intent.tool), target,
                                           intent.step))
                self.last_step = intent
                if agent_tool(intent.args) is not None:
                    self.last_agent_step = intent
            self._newest_commit = max(self._newest_commit, rec.intent)
            self._undone = [(a, i) for a, i in self._undone if a.intent > self._newest_commit]
        elif isinstance(rec, Abort):
            self.aborted.append(rec.intent)
            intent = self.fold.open.get(rec.intent)
            self._decision(rec, intent)
            if intent is not None:
                # A step recovery (or a person) found not applied is still to be done.
                if (rec.intent > self._newest_commit
                        and (rec.reason.startswith("recovery:") or rec.decided_by)
                        and "now holds the change" not in rec.reason):
                    self._undone.append((rec, intent))
                if (intent.tool == "exec" and rec.restored and rec.saved
                        and rec.saved[0][0] == "."):
                    self._restores.append((rec, intent))
        self.fold.feed(rec)

    def _decision(self, rec: Commit | Abort, intent: Intent | None) -> None:
        if rec.decided_by and intent is not None:
            self.decided.append(Decided(intent.lsn, intent.tool, intent.args, intent.target,
                                        isinstance(rec, Commit), rec.decided_by, rec.note))

    def open_intents(self) -> list[Intent]:
        """Intents not closed, oldest first."""
        return [self.fold.open[k] for k in sorted(self.fold.open)]

    def trailing_restores(self) -> list[tuple[Abort, Intent]]:
        """(abort, its exec intent) for every restore abort after the last
        intent: a restore a crash may have cut short."""
        return list(self._restores)

    def undone(self, decided: set[Lsn]) -> tuple[Outcome, ...]:
        """Intents an earlier recovery aborted after the last committed one (not
        those it left to another run's change, nor those decided now)."""
        return tuple(
            Outcome(i.lsn, i.tool, i.args, i.target, NOT_APPLIED, "aborted",
                    a.reason.removeprefix("recovery: ")
                    + (f" by {a.decided_by}" if a.decided_by else ""), step=i.step)
            for a, i in self._undone if a.intent not in decided)

    def drift(self) -> tuple[Drift, ...]:
        """The paths whose content is not what the committed steps since the
        newest checkpoint left (ledger.py)."""
        out = []
        for path, held in sorted(self.fold.held.items()):
            have = found(self.wt, path)
            # A directory where the log says no file is there: a step (or an
            # undo) turned the file into a directory, which is no drift.
            if have != held.state and not (have == DIRECTORY and held.state == ABSENT):
                out.append(Drift(path, held.lsn, held.state, have))
        return tuple(out)


__all__ = ["Scan"]
