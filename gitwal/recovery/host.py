"""What recovery's decision mixins (files.py, shell.py) need from the
recovery pass that mixes them in (decide.py's :class:`Recovery`)."""

from __future__ import annotations

from ..base.ids import Lsn
from ..log.store import Ref, Store
from ..records.model import Approval, Intent, Record
from ..worktree.tree import Worktree
from .elsewhere import Elsewhere
from .report import Outcome


class DecisionHost:
    """Provided by :class:`gitwal.recovery.decide.Recovery`."""

    store: Store
    wt: Worktree
    redo: bool
    restore: bool
    next_lsn: Lsn
    approved: dict[Lsn, Approval]  # irreversible intents a person approved (with authority)
    unapproved: tuple[Approval, ...]  # approvals without authority here: data
    intent_at: dict[int, int]  # open intent LSN -> the time of the append carrying it

    def _append(self, record: Record, refs: list[Ref] | None = None) -> None:
        raise NotImplementedError

    def _outcome(self, intent: Intent, outcome: str, action: str, detail: str,
                 changed: tuple[str, ...] = (), open_: bool = False,
                 saved: tuple[tuple[str, str, str], ...] = ()) -> Outcome:
        raise NotImplementedError

    def _committed_elsewhere(self) -> dict[tuple[str, str], str]:
        raise NotImplementedError

    def _steps_elsewhere(self) -> list[Elsewhere]:
        raise NotImplementedError
