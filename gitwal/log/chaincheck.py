"""The rules a run's chain of records obeys, checked as the records are read
oldest first: a plan (LSN 1) or a checkpoint first, LSNs dense and in order,
every closing closes an earlier open intent, once (docs/format.md).
"""

from __future__ import annotations

from ..base.errors import CorruptLog
from ..records.model import Abort, Checkpoint, Commit, Intent, Plan, Record, type_name
from .appends import UNTRUSTED


class ChainCheck:
    """The records of a chain, fed oldest first, are a chain: a plan (LSN 1)
    or checkpoint first, LSNs dense and in order, every closing closes an
    earlier open intent, once.

    Readers fold the chain into "intent -> its closing"; a closing that names
    the plan, a checkpoint, itself, a later LSN or an intent closed already
    would make that fold lie (or fail), so it is refused here."""

    def __init__(self, ref_name: str) -> None:
        self.ref_name = ref_name
        self._next: int | None = None
        self._open: set[int] = set()

    def empty(self) -> None:
        raise CorruptLog(
            f"log {self.ref_name}: the chain does not start with a plan or checkpoint",
            "the ref does not hold a gitwal log",
        )

    def __call__(self, rec: Record) -> None:
        if self._next is None:
            if not isinstance(rec, (Plan, Checkpoint)):
                self.empty()
            if isinstance(rec, Plan) and rec.lsn != 1:
                raise CorruptLog(f"log {self.ref_name}: the plan is not LSN 1", UNTRUSTED)
            self._next = rec.lsn
        if rec.lsn != self._next:
            raise CorruptLog(
                f"log {self.ref_name}: expected LSN {self._next}, found {rec.lsn} "
                "(a record is missing, duplicated or out of order)",
                "the chain was rewritten outside gitwal; do not resume from it",
            )
        self._next += 1
        if isinstance(rec, Intent):
            self._open.add(rec.lsn)
        elif isinstance(rec, (Commit, Abort)):
            if rec.intent not in self._open:
                raise CorruptLog(
                    f"log {self.ref_name} LSN {rec.lsn}: the {type_name(rec)} closes "
                    f"LSN {rec.intent}, which is not an earlier open intent of the log",
                    UNTRUSTED,
                )
            self._open.discard(rec.intent)
