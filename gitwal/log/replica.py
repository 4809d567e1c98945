"""The :class:`Replica` protocol the store is handed by the facade (the one
that replicates appends to a remote is ``remote/replicate.py``'s), the way it
is handed a ``Signer``: the log layer never imports ``remote/``.
"""

from __future__ import annotations

from typing import Protocol

from ..base.ids import CommitId, RunId


class Replica(Protocol):
    """Where each append of a run goes after it is durable here."""

    def appended(self, run: RunId, head: CommitId) -> None:
        """The run's ref moved to ``head`` (called by ``Store.append`` after the
        move, the run lock still held): hand it on without waiting, never raise."""

    def hold(self, run: RunId, head: CommitId, what: str) -> None:
        """A step's commit record ``head`` is durable here: return once the
        remote holds it when the configured durability asks for that, else
        raise :class:`~gitwal.base.errors.NotOnRemote` naming ``what``."""
