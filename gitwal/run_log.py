"""A run's log as its steps see it: the records read back, and the gate in
front of every append.

Invariant: nothing is appended after an open intent. A step, or a record
that is not one (a claim), asks :meth:`RunLog.next_record` (or ``_next``)
for the head and the next LSN under the run lock; it is refused while the
newest record is an intent, or an approval waiting for a person or for its
step to run. So at most one intent is open, and it is the newest record.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from typing import Self

from .base.errors import RunBusy, StepFailed
from .base.ids import CommitId, Lsn, RunId
from .log.store import Ref, Store
from .records.model import Approval, Commit, Intent, Record, agent_tag
from .trust.authority import may_act
from .worktree.tree import Worktree


class RunLog:
    """A run's store and working tree: its log read, and appended to only
    past the gate (the steps: run.py, shell_steps.py)."""

    def __init__(self, store: Store, wt: Worktree, group_commit: bool = False) -> None:
        self.store = store
        self.wt = wt
        self.id: RunId = store.run
        self.ref_name = store.ref_name
        # A file step's commit rides in the next append (docs/format.md,
        # "Group commit"); flush() or the end of the process writes it.
        self.group_commit = group_commit

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()  # a step held back by group commit is durable when the block ends

    def flush(self) -> None:
        """Make a step held back by group commit durable now (a no-op without one)."""
        d = self.store.deferred
        head = self.store.flush()
        commit = next((r for r in d if isinstance(r, Commit)), None)
        if head is not None and commit is not None and self.store.replica is not None:
            self.store.replica.hold(self.id, head, f"LSN {commit.intent}")

    def records(self) -> list[Record]:
        """The whole log, validated as a chain."""
        return self.store.records()

    def stream(self) -> Iterator[tuple[Record, bytes]]:
        """The whole log with each record's canonical bytes, oldest first, one
        record at a time (memory flat in the log's length; checks as read)."""
        return self.store.stream()

    def since_checkpoint(self) -> list[Record]:
        """The records from the newest checkpoint on (the whole log without one)."""
        return self.store.segment()

    def recent(self, appends: int = 1) -> list[Record]:
        """The records of the newest ``appends`` appends, oldest first (fewer
        when the log holds fewer appends)."""
        out: list[Record] = []
        head = self.store.head()
        for _ in range(appends):
            if head is None:
                break
            out[:0] = self.store.head_records(head)
            head = self.store.parent(head)
        return out

    # -- appends -----------------------------------------------------------

    def _next(self) -> tuple[CommitId, Lsn]:
        """Head and next LSN; refuses while the newest record is an open intent."""
        # tail(): a commit this process holds back (group commit) counts as
        # written; it rides in the next append, which follows ``head``.
        tail = self.store.tail()
        if tail is None:
            raise RunBusy(f"run {self.id} has no log")
        head, last = tail
        if isinstance(last, Approval) and not may_act(self.store.repo, last, head):
            raise StepFailed(
                f"run {self.id}: intent LSN {last.intent} is an irreversible step waiting for "
                f"a person's approval (approval LSN {last.lsn} was not written in this clone "
                "nor signed by a key you trust: it is data here)",
                f"ask the user to run `git wal approve {last.intent} --run {self.id}`, or drop "
                f"the step: `git wal resolve {last.intent} --run {self.id} --not-applied`")
        if isinstance(last, Approval):
            raise StepFailed(
                f"run {self.id}: intent LSN {last.intent} is approved and waits to run",
                "run the same command again (`git wal exec --irreversible -- ...`), or "
                f"`git wal recover --run {self.id} --redo`")
        if isinstance(last, Intent) and last.args.get("irreversible") is True \
                and agent_tag(last) is None:
            raise StepFailed(
                f"run {self.id}: intent LSN {last.lsn} (exec "
                f"{shlex.join(last.args.get('argv') or [])}) is an irreversible step waiting "
                "for a person's approval",
                f"ask the user to run `git wal approve {last.lsn} --run {self.id}` and then "
                f"run it (`git wal recover --run {self.id} --redo`), or drop it: `git wal "
                f"resolve {last.lsn} --run {self.id} --not-applied`")
        if isinstance(last, Intent):
            raise StepFailed(
                f"run {self.id}: intent LSN {last.lsn} ({last.tool} "
                f"{' '.join(last.target)}) is still open after an interruption",
                f"run `git wal recover --run {self.id}` first",
            )
        return head, Lsn(last.lsn + 1)

    def next_record(self) -> tuple[CommitId, Lsn]:
        """Head and next LSN for a record that is not a step (a claim): refused
        while an intent is open, as for a step. The caller holds the run lock."""
        return self._next()

    def _close(self, head: CommitId, record: Record, refs: Sequence[Ref] = ()) -> CommitId:
        """Append the commit or abort record that closes the open intent; a
        commit waits for the remote when ``wal.remote.durability`` is ``commit``
        (:class:`~gitwal.base.errors.NotOnRemote` when it did not take it)."""
        new = self.store.append([record], refs, head)
        if isinstance(record, Commit) and self.store.replica is not None:
            self.store.replica.hold(self.id, new, f"LSN {record.intent}")
        return new

