"""Reading one run's log: the chain of append commits under ``refs/wal/<run>``.

Every record is validated as it is read (docs/format.md): a corrupt or
foreign record stops the read with :class:`CorruptLog`, it is never trusted.
One append commit is read by appends.py; writing lives in store.py, the only
writer of ``refs/wal/*``. The rules a chain obeys are chaincheck.py's, the
oldest-first walk is forward.py's (the base of :class:`Chain`), and what a
process keeps of the runs it read is readcache.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2

from ..base.errors import CorruptLog, UnknownRun
from ..base.ids import CommitId, RunId
from ..base.repository import common_dir
from ..records.codec import decode
from ..records.model import Checkpoint, Plan, Record
from .appends import UNTRUSTED
from .chaincheck import ChainCheck
from .forward import ForwardWalk
from .readcache import HEADS, ROOT_PLANS, SEGMENTS

# Group commit (groupcommit.py): for each run (common dir, run id) whose
# store in this process holds a record back, the function that writes it.
# Every reader's head() calls it first, so no object in this process reads a
# step open that this process closed in memory.
HELD: dict[tuple[Path, str], Callable[[], None]] = {}


class Chain(ForwardWalk):
    """Reads and validates the records of one run."""

    def __init__(self, repo: pygit2.Repository, run: RunId) -> None:
        super().__init__(repo, run)
        # The newest append seen or written, with its records. A commit id fixes
        # its records, so a hit is exact; it saves re-reading the head that the
        # step protocol, the seal check and the append itself each look at.
        self._newest: tuple[str, list[Record]] | None = None

    # -- reading -----------------------------------------------------------

    def exists(self) -> bool:
        return self.ref_name in self.repo.references

    def head(self) -> CommitId | None:
        if HELD:
            write = HELD.get((common_dir(self.repo), self.run))
            if write is not None:
                write()
        return self.ref_head()

    def ref_head(self) -> CommitId | None:
        """The commit the run's ref names, as it is (no held-back record written)."""
        try:
            ref = self.repo.references.get(self.ref_name)
        except pygit2.InvalidSpecError:
            raise UnknownRun(f"{self.run!r} is not a valid run id") from None
        if ref is None:
            return None
        return CommitId(str(ref.target))

    def records(self) -> list[Record]:
        """Every record of the live chain, oldest first, validated as a chain."""
        return [rec for rec, _ in self._walk(self._require_head(), stop_at_checkpoint=False)]

    def raw_records(self) -> list[tuple[Record, bytes]]:
        """As :meth:`records`, with each record's canonical bytes."""
        return self._walk(self._require_head(), stop_at_checkpoint=False)

    def stream(self, head: CommitId | None = None) -> Iterator[tuple[Record, bytes]]:
        """As :meth:`raw_records`, one record at a time: memory holds the
        walk's commit ids, not the records. The chain checks run as records
        are read, so a defect raises :class:`CorruptLog` where it is met,
        after the records before it were yielded, and nothing past it is."""
        head = self._require_head() if head is None else head
        self.check_named(self._commit(head))
        yield from self._read_forward(head, to_checkpoint=False)

    def forward(self, head: CommitId | None = None) -> Iterator[Record]:
        """The records of :meth:`segment`, oldest first, one at a time: memory
        holds the appends' ids, not the records (one-shot readers of long
        runs: `status`, `recover`). Checked as :meth:`stream` checks.

        The walk back stops at the append whose commit message names a
        checkpoint (store.py writes it). The message is a hint only: an
        append it names must hold a checkpoint (else :class:`CorruptLog`: a
        segment must start with one), and a checkpoint it fails to name is
        read past, so readers treat a checkpoint met mid-stream as the start
        of the segment (as :class:`~gitwal.changes.ledger.Fold` does)."""
        head = self._require_head() if head is None else head
        self.check_named(self._commit(head))
        kept = SEGMENTS.get((self.repo.path, self.run, head))
        if kept is not None:  # read before by this process (and validated)
            yield from kept
            return
        for rec, _data in self._read_forward(head, to_checkpoint=True):
            yield rec

    def segment(self, head: CommitId | None = None) -> list[Record]:
        """Records from the newest checkpoint on (all records if there is none),
        of the chain ending at ``head`` (default: the ref's head).

        The cost depends on the records after the checkpoint only: the walk
        stops at the append commit that holds the checkpoint, or earlier, at
        an append whose segment this process read before
        (:data:`~gitwal.log.readcache.SEGMENTS`): a process that reads a run
        again and again (the hook server, the MCP server) reads only what was
        appended since.
        """
        head = self._require_head() if head is None else head
        key = (self.repo.path, self.run, head)
        kept = SEGMENTS.get(key)
        if kept is not None:
            # The newest append is the one a concurrent prune can hit: its
            # objects are checked on every read, as a walk would.
            self.check_named(self._commit(head))
            return list(kept)
        records = self._read_segment(head)
        SEGMENTS.put(key, records)
        return records

    def _read_segment(self, head: CommitId) -> list[Record]:
        """Walk back from ``head`` to the newest checkpoint, the root, or an
        append whose segment is kept; validate the whole segment as a chain."""
        batches: list[list[Record]] = []
        base: tuple[Record, ...] = ()
        oid = str(head)
        while True:
            commit = self._commit(oid)
            if oid == head:
                self.check_named(commit)
            batch = self._commit_records(commit)
            cps = [i for i, r in enumerate(batch) if isinstance(r, Checkpoint)]
            if cps:
                batches.append(batch[cps[-1] :])
                break
            batches.append(batch)
            parents = commit.parent_ids
            if len(parents) > 1:
                raise self._corrupt(oid, "an append commit has more than one parent")
            if not parents:
                break
            oid = str(parents[0])
            kept = SEGMENTS.get((self.repo.path, self.run, CommitId(oid)))
            if kept is not None:
                base = kept
                break
        records = [*base, *(rec for batch in reversed(batches) for rec in batch)]
        self._validate(records)
        return records

    def plan(self, first: Record) -> Plan:
        """The run's plan, given the first record of a segment (O(1))."""
        if isinstance(first, Plan):
            return first
        if not isinstance(first, Checkpoint):
            raise CorruptLog(f"log {self.ref_name}: a segment starts with a {type(first)}")
        try:
            blob = self.repo[first.plan]
        except KeyError:
            raise CorruptLog(f"log {self.ref_name}: the plan blob is missing",
                             UNTRUSTED) from None
        assert isinstance(blob, pygit2.Blob)
        plan = decode(blob.data, f"{self.ref_name} plan")
        if not isinstance(plan, Plan) or plan.run != self.run:
            raise CorruptLog(f"log {self.ref_name}: the checkpoint names no plan of this run",
                             UNTRUSTED)
        return plan

    def root_plan(self, head: CommitId) -> Plan:
        """The run's plan without decoding the chain: walk the parents to the
        root (the plan, or the checkpoint a compaction left) and read it.

        The walk stops early at the append where this process last found the
        plan (a commit id fixes its whole ancestry, so the root is the same):
        a long-lived process walks only the appends made since."""
        key = (self.repo.path, self.run)
        known = ROOT_PLANS.get(key)
        oid = head
        while True:
            if known is not None and oid == known[0]:
                plan = known[1]
                break
            commit = self._commit(oid)
            parents = commit.parent_ids
            if not parents:
                plan = self.plan(self._commit_records(commit)[0])
                break
            oid = CommitId(str(parents[0]))
        ROOT_PLANS[key] = (head, plan)
        return plan

    def _require_head(self) -> CommitId:
        head = self.head()
        if head is None:
            raise UnknownRun(f"no log for run {self.run}", "list runs with `git wal runs`")
        return head

    def chain(self, head: CommitId) -> list[tuple[CommitId, list[Record]]]:
        """(commit, records) of every append from ``head`` back to the root, newest first."""
        return [(CommitId(str(c.id)), records) for c, records in self.appends(head)]

    def appends(self, head: CommitId) -> Iterator[tuple[pygit2.Commit, list[Record]]]:
        """(append commit, its records) from ``head`` back to the root, newest first,
        read as they are asked for (a reader looking for recent records stops early)."""
        oid: str | None = head
        while oid is not None:
            commit = self._commit(oid)
            yield commit, self._commit_records(commit)
            parents = commit.parent_ids
            if len(parents) > 1:
                raise self._corrupt(oid, "an append commit has more than one parent")
            oid = str(parents[0]) if parents else None

    def _walk(self, head: CommitId,
              stop_at_checkpoint: bool) -> list[tuple[Record, bytes]]:
        out: list[tuple[Record, bytes]] = []
        oid: str | pygit2.Oid | None = head
        while oid is not None:
            commit = self._commit(oid)
            batch = self._commit_raw(commit)
            if oid is head:
                self.check_named(commit)
            cps = [i for i, (r, _) in enumerate(batch) if isinstance(r, Checkpoint)]
            if stop_at_checkpoint and cps:
                out.extend(reversed(batch[cps[-1] :]))
                break
            out.extend(reversed(batch))
            parents = commit.parent_ids
            if len(parents) > 1:
                raise self._corrupt(str(oid), "an append commit has more than one parent")
            oid = parents[0] if parents else None
        out.reverse()
        self._validate([rec for rec, _ in out])
        return out

    def _validate(self, records: list[Record]) -> None:
        """The records read are a chain (:class:`ChainCheck`)."""
        check = ChainCheck(self.ref_name)
        for rec in records:
            check(rec)
        if not records:
            check.empty()

    def head_records(self, head: CommitId) -> list[Record]:
        """The records of the head append alone (cheap: one commit, one tree).

        The newest append read of each run is kept for the process (a commit id
        fixes its records): a long-lived process (the agents' hook server)
        asking about other runs at every step decodes each new head once."""
        if self._newest is not None and self._newest[0] == head:
            return list(self._newest[1])
        key = (self.repo.path, self.run)
        known = HEADS.get(key)
        if known is not None and known[0] == head:
            records = list(known[1])
        else:
            records = self._commit_records(self._commit(head))
            HEADS[key] = (head, tuple(records))
        self._newest = (head, records)
        return list(records)

    def parent(self, head: CommitId) -> CommitId | None:
        """The append before ``head`` (None at the root)."""
        parents = self._commit(head).parent_ids
        return CommitId(str(parents[0])) if parents else None

    def validated(self, head: CommitId) -> list[tuple[Record, bytes]]:
        """Every record from ``head`` back to the root, validated as a chain."""
        return self._walk(head, stop_at_checkpoint=False)
