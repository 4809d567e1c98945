"""What `git wal status` and `git wal runs` say of a run: its :class:`Status`,
folded in one pass over the log's newest segment, and its :class:`RunInfo`
line in the list of runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .base.ids import Lsn, RunId
from .log.store import Store
from .records.model import Abort, Checkpoint, Commit, Intent, Seal, Unlogged
from .remote.claim_refs import RemoteClaim
from .remote.replica_state import RemoteState
from .together.claims import Live


@dataclass(frozen=True)
class RunInfo:
    run: RunId
    task: str
    records: int
    open: tuple[Lsn, ...]  # intents with no closing record (`open` in docs/json.md)
    current: bool
    worktree: tuple[str, str] | None = None  # (name, path) the run is bound to
    damaged: str | None = None  # why the log cannot be read (`git wal repair RUN`)
    claims: tuple[Live, ...] = ()  # live claims (claims.py)
    remote: RemoteState | None = None  # its replication (docs/remote-runs.md); None: no remote
    # the live claims on its remote as this clone last fetched them, each with
    # whether it binds here (a key the user trusts signed it)
    remote_claims: tuple[tuple[RemoteClaim, bool], ...] = ()

    @property
    def open_intents(self) -> tuple[Lsn, ...]:
        """The former name of :attr:`open` (kept for existing callers)."""
        return self.open


@dataclass(frozen=True)
class Status:
    run: RunId
    task: str
    records: int
    committed: tuple[Lsn, ...]
    aborted: tuple[Lsn, ...]
    open: tuple[Lsn, ...]
    next_lsn: Lsn
    checkpoint: Lsn | None = None  # LSN of the newest checkpoint; lists start after it
    unlogged: tuple[Lsn, ...] = ()  # `unlogged` records: changes with no durable intent
    # committed intents whose commit recorded another post than predicted
    prediction_miss: tuple[Lsn, ...] = ()
    sealed: Lsn | None = None  # LSN of the seal: the run is finished, nothing may follow
    worktree: tuple[str, str] | None = None  # (name, path) the run is bound to; None: unbound
    remote: RemoteState | None = None  # its replication (docs/remote-runs.md); None: no remote

    @property
    def missed(self) -> tuple[Lsn, ...]:
        """The former name of :attr:`prediction_miss` (kept for existing callers)."""
        return self.prediction_miss


def run_status(store: Store) -> Status:
    """Intents after the newest checkpoint (the cost does not grow before it)."""
    # One pass over the segment, holding LSNs and the open intents' posts,
    # not the records: memory stays flat in the run's length.
    records = store.forward()
    first = last = next(records)
    plan = store.plan(first)
    cp: Checkpoint | None = None
    committed: list[Lsn] = []
    aborted: list[Lsn] = []
    unlogged: list[Lsn] = []
    missed: list[Lsn] = []
    posts: dict[Lsn, tuple[str, ...] | None] = {}  # open intent -> predicted post
    for rec in itertools.chain((first,), records):
        last = rec
        if isinstance(rec, Checkpoint):  # the segment starts (again) here
            cp = rec
            committed, aborted, unlogged, missed = [], [], [], []
        elif isinstance(rec, Intent):
            posts[rec.lsn] = rec.post
        elif isinstance(rec, Commit):
            post = posts.pop(rec.intent)
            committed.append(rec.intent)
            # A prediction miss: an agent step whose commit recorded what it observed.
            if post is not None and rec.post != post:
                missed.append(rec.intent)
        elif isinstance(rec, Abort):
            posts.pop(rec.intent)
            aborted.append(rec.intent)
        elif isinstance(rec, Unlogged):
            unlogged.append(rec.lsn)
    return Status(
        store.run, plan.task, last.lsn, tuple(sorted(committed)), tuple(sorted(aborted)),
        tuple(sorted(posts)), Lsn(last.lsn + 1), None if cp is None else cp.lsn,
        tuple(unlogged), tuple(sorted(missed)),
        last.lsn if isinstance(last, Seal) else None, plan.worktree,
    )
