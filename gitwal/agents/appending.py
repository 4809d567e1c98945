"""One hook call's turn at a run's log: the run lock, the segment it read,
and what the call adds, appended at once.

The lock is taken for the append only, never across the agent's effect.
Before a call logs its own intent, another call's open intent is closed: one
of its own thread is settled from the tree; one of another thread (or one
whose closing hook runs in the background) is given time to close, polled
outside the lock, since its closing hook needs that lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import pygit2

from ..base.errors import UnknownRun
from ..base.ids import CommitId, Lsn, TreeId
from ..log.store import Ref
from ..records.model import Intent, Record, agent_tag
from ..run import Run
from .call import Call, Outcome
from .expectation import Expectation, Staged

# Seconds between looks at a step whose closing hook is awaited. Short: with
# background closing hooks the next call usually waits a few milliseconds only.
POLL = 0.005


@dataclass
class Pending:
    """The segment as read under the run lock, plus what one call appends
    (in one append, when the call's work is done)."""

    head: CommitId
    records: list[Record]
    pending: list[tuple[Record, list[Ref]]]
    # Locks a call takes under the run lock and keeps until its append is done.
    held: ExitStack = field(default_factory=ExitStack)

    @property
    def next_lsn(self) -> Lsn:
        return Lsn(self.records[-1].lsn + len(self.pending) + 1)

    def add(self, record: Record, refs: Sequence[Ref] = ()) -> None:
        self.pending.append((record, list(refs)))

    def extend(self, staged: Iterable[Staged]) -> None:
        """Add what a look at the tree (expectation.py) asked for, in its order."""
        for s in staged:
            self.add(s.record, s.refs)

    def all(self) -> list[Record]:
        return self.records + [r for r, _ in self.pending]


class Appender:
    """Hook calls on one run, each appending what it adds in one append."""

    def __init__(self, run: Run, full_check: bool = True,
                 async_close: frozenset[str] = frozenset()) -> None:
        self.run = run
        self.store = run.store
        self.wt = run.wt
        self.repo: pygit2.Repository = run.store.repo
        self.look = Expectation(run, full_check)
        # The agent's tools whose closing hook runs in the background (Claude
        # Code: file tools, `"async": true`): it may come after the next call's.
        self.async_close = async_close

    # -- the lock and the append --------------------------------------------

    @contextmanager
    def _state(self) -> Iterator[Pending]:
        with self.store.locked():
            # No live holder of the run lock can own a ref lock now.
            self.store.clear_stale_ref_lock()
            head = self.store.head()
            if head is None:
                raise UnknownRun(f"no log for run {self.run.id}")
            # The segment at the head we will append to (log/readcache.py keeps the
            # segments it read: a hook server reads only the appends since).
            state = Pending(head, self.store.segment(head), [])
            with state.held:
                yield state
                if state.pending:
                    refs = {(r.oid, r.is_tree): r for _, rs in state.pending for r in rs}
                    self.store.append([r for r, _ in state.pending],
                                      sorted(refs.values(), key=lambda r: r.oid), head)

    # -- the log's expectation -------------------------------------------------

    def _notice(self, state: Pending, noticed: str, paths: Sequence[str] = (),
                snapshot: TreeId | None = None) -> None:
        """Add an ``unlogged`` record of whatever differs from the expectation."""
        state.extend(self.look.notice(state.all(), noticed, paths, snapshot))

    def _open(self, records: list[Record]) -> Intent | None:
        last = records[-1]
        return last if isinstance(last, Intent) else None

    def _make_way(self, state: Pending, call: Call, event: str, wait: float) -> None:
        """Close an open intent of another call before this call logs its own.

        Calls of one thread run one at a time (an agent runs its writing tools
        serially), so an open intent of the same thread is over: settle it. An
        open intent of another thread may still be running: give its closing
        hook ``wait`` seconds, then settle it.
        """
        open_ = self._open(state.records)
        if open_ is None:
            return
        tag = agent_tag(open_)
        if tag is not None and tag.get("call") == call.call_id:
            return
        same_thread = tag is not None and tag.get("thread") == call.thread
        if wait > 0 and (not same_thread or self.closing_may_come(open_)):
            raise _WaitFor(open_.lsn)
        what = "no closing hook came before the next call" if tag else (
            "left open by an interrupted process")
        state.extend(self.look.settle(state.all(), open_, what))

    def closing_may_come(self, intent: Intent) -> bool:
        """Whether the closing hook of an open file step is still to be expected
        although a later call of its thread has begun: its closing hook runs in
        the background and the tool did run (a target is no longer as it was).
        A step whose targets are untouched did not run: nothing will close it."""
        tag = agent_tag(intent)
        if tag is None or intent.tool == "exec" or tag.get("tool") not in self.async_close:
            return False
        return tuple(self.wt.state(p) for p in intent.target) != intent.pre

    def await_closing(self, wait: float) -> None:
        """Give an open step's background closing hook up to ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            open_ = self._open(self.store.segment())
            if open_ is None or not self.closing_may_come(open_):
                return
            time.sleep(POLL)

    def _locked(self, call: Call, event: str, wait: float,
                body: Callable[[Pending], Outcome]) -> Outcome:
        """Run ``body`` under the run lock once no other call's intent is open
        (waiting at most ``wait`` seconds for another thread's), then append
        what it added, in one append."""
        deadline = time.monotonic() + wait
        while True:
            try:
                with self._state() as state:
                    self._make_way(state, call, event,
                                   max(0.0, deadline - time.monotonic()))
                    outcome = body(state)
                return Outcome(tuple(r for r, _ in state.pending), outcome.intent,
                               outcome.note)
            except _WaitFor:
                time.sleep(POLL)  # outside the lock: the closing hook needs it


class _WaitFor(Exception):
    """An open intent of another thread may still be running: poll again."""

    def __init__(self, lsn: Lsn) -> None:
        super().__init__(lsn)
        self.lsn = lsn


__all__ = ["Appender", "Pending"]
