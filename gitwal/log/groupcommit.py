"""Group commit: a step's commit record held back in memory, to ride in the
run's next append instead of costing one of its own (docs/format.md, "Group
commit"). A mixin of :class:`~gitwal.log.store.Store`, the one writer.

Invariants:

* a held-back record follows exactly the head it was deferred at: the next
  append of this store from that head carries it first; an append from any
  other head (the log moved: another process closed the step) drops it;
* every reader in this process, of this store or any other object of the
  run (``Chain.head``, the entry of every read, through ``chain.HELD``),
  writes the held-back records first, so nothing in the process shows a
  step open that it closed (unless another holds the run lock then: a
  reader never waits); only :meth:`GroupCommit.tail`, the gate of the next
  step, reads past this store's own record without writing it;
* what is held is lost by a crash, and nothing else: the step's intent is
  durable and its targets hold their post-images, so recovery finds it
  "applied, commit missing" and commits it (docs/recovery.md).
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import RunBusy, WalError
from ..base.ids import CommitId
from ..base.repository import common_dir
from ..records.model import Record
from .chain import HELD, Chain
from .keepalive import Ref
from .locks import RunLocking


@dataclass(frozen=True)
class Deferred:
    """Records held back by group commit, and the head they follow."""

    head: CommitId
    records: tuple[Record, ...]
    refs: tuple[Ref, ...]


EXIT_WAIT = 10.0  # seconds the exit's flush waits for the run lock
# Stores holding records back, flushed when the interpreter exits normally:
# strong references, so a run object dropped by its caller is flushed too.
_HOLDING: set[GroupCommit] = set()
# The one object holding each run's record back, by (common dir, run id).
_BY_RUN: dict[tuple[Path, str], GroupCommit] = {}


@atexit.register
def _flush_at_exit() -> None:
    for store in list(_HOLDING):
        # An exiting process waits a little for the run lock, never for ever;
        # a commit not written is not lost: recovery re-derives it.
        with contextlib.suppress(Exception):
            store.flush(timeout=EXIT_WAIT)


class GroupCommit(Chain, RunLocking):
    """Deferring, flushing and reading past held-back records; the store's
    ``append`` carries them (it provides :meth:`append`)."""

    _deferred: Deferred | None

    def append(self, records: Sequence[Record], refs: Sequence[Ref],
               expect: CommitId | None) -> CommitId:
        raise NotImplementedError  # Store's

    def defer(self, records: Sequence[Record], refs: Sequence[Ref], head: CommitId) -> None:
        """Hold ``records`` (a step's commit) back: they ride in this store's
        next append that follows ``head``, or :meth:`flush` writes them. Until
        then they exist in this process only; a crash loses them, and every
        other reader sees the step's intent open: "applied, commit missing",
        which recovery re-derives (docs/recovery.md)."""
        if self._deferred is not None:
            raise WalError("a record is already held back", "flush() before deferring another")
        self._hold(Deferred(head, tuple(records), tuple(refs)))

    def _hold(self, d: Deferred) -> None:
        self._deferred = d
        _HOLDING.add(self)
        _BY_RUN[self._held_key()] = self
        HELD[self._held_key()] = self._write_held

    def _held_key(self) -> tuple[Path, str]:
        return common_dir(self.repo), self.run

    def _write_held(self) -> None:
        """What another reader in this process calls first (chain.HELD): write
        the held-back records now, unless the run lock is busy (then the step
        reads open, as in any other process)."""
        with contextlib.suppress(RunBusy):
            self.flush(wait=False)

    def _release(self) -> None:
        """Nothing is held back any more (written, or the log moved past it)."""
        self._deferred = None
        _HOLDING.discard(self)
        key = self._held_key()
        if _BY_RUN.get(key) is self:
            del _BY_RUN[key]
            HELD.pop(key, None)

    @property
    def deferred(self) -> tuple[Record, ...]:
        """The records held back (oldest first), not yet durable."""
        return () if self._deferred is None else self._deferred.records

    def tail(self) -> tuple[CommitId, Record] | None:
        """The head and the newest record, a held-back one included: what the
        next append follows. Writes nothing (:meth:`head` would flush)."""
        holder = _BY_RUN.get(self._held_key())
        if holder is not None and holder is not self:
            if not self.holding or self._deferred is not None:
                holder._write_held()
            else:
                # Another object of this process holds this run's record back
                # and this one holds the run lock (the step's gate, where the
                # other cannot write): this one carries it.
                d = holder._deferred
                holder._release()
                if d is not None:
                    self._hold(d)
        head = self.ref_head()
        if head is None:
            return None
        d = self._deferred
        if d is not None and d.head == head:
            return head, d.records[-1]
        return head, self.head_records(head)[-1]

    def flush(self, wait: bool = True, timeout: float | None = None) -> CommitId | None:
        """Make the held-back records durable in an append of their own, under
        the run lock (taken unless held; ``wait`` False: RunBusy at once when
        another holds it; ``timeout``: seconds to wait, as for ``locked``).
        The new head, or None when nothing was held or the log moved on
        without them (another process closed the step: the log decides)."""
        d = self._deferred
        if d is None:
            return None
        if self.holding:
            return self._flush(d)
        with self.locked(wait=wait, timeout=timeout):
            return self._flush(d)

    def _flush(self, d: Deferred) -> CommitId | None:
        self._release()
        if self.ref_head() != d.head:
            return None
        try:
            return self.append(d.records, d.refs, d.head)
        except BaseException:
            self._hold(d)  # not written: still held, for a later flush
            raise
