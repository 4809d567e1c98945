"""Reading one run's log: the chain of append commits under ``refs/wal/<run>``.

Every record is validated as it is read (docs/format.md): a corrupt or
foreign record stops the read with :class:`CorruptLog`, it is never trusted.
Writing lives in store.py, the only writer of ``refs/wal/*``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pygit2

from .codec import decode
from .errors import CorruptLog, UnknownRun
from .ids import CommitId, RunId
from .records import Abort, Checkpoint, Commit, Intent, Plan, Record, type_name

REF_PREFIX = "refs/wal/"
LSN_DIGITS = 12
RECORD_NAME_LEN = LSN_DIGITS + len(".json")  # <lsn:012d>.json
UNTRUSTED = "the log was damaged or rewritten outside gitwal; nothing past it is trusted"
SEGMENTS_KEPT = 16  # segments a process keeps (see _Segments)


def repair_hint(run: str) -> str:
    """For a log whose objects are missing (a concurrent `git gc --prune=now`, a disk)."""
    return (f"objects of the log are missing; `git wal repair {run}` cuts the log back to "
            "its newest intact record (and says what was lost)")


def common_dir(repo: pygit2.Repository) -> Path:
    """The git dir shared by all worktrees (refs and objects live there)."""
    gitdir = Path(repo.path)
    common = gitdir / "commondir"
    if common.exists():
        return (gitdir / common.read_text().strip()).resolve()
    return gitdir


def worktree_name(repo: pygit2.Repository) -> str:
    """This worktree's stable identity: its name under ``<common>/worktrees/``,
    or "" for the main worktree (no linked worktree can be named "")."""
    gitdir = Path(repo.path).resolve()
    if gitdir == common_dir(repo).resolve():
        return ""
    return gitdir.name


class Chain:
    """Reads and validates the records of one run."""

    def __init__(self, repo: pygit2.Repository, run: RunId) -> None:
        self.repo = repo
        self.run = run
        self.ref_name = REF_PREFIX + run
        # The newest append seen or written, with its records. A commit id fixes
        # its records, so a hit is exact; it saves re-reading the head that the
        # step protocol, the seal check and the append itself each look at.
        self._newest: tuple[str, list[Record]] | None = None

    # -- reading -----------------------------------------------------------

    def exists(self) -> bool:
        return self.ref_name in self.repo.references

    def head(self) -> CommitId | None:
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
        """As :meth:`records`, with each record's canonical bytes (for streaming)."""
        return self._walk(self._require_head(), stop_at_checkpoint=False)

    def segment(self, head: CommitId | None = None) -> list[Record]:
        """Records from the newest checkpoint on (all records if there is none),
        of the chain ending at ``head`` (default: the ref's head).

        The cost depends on the records after the checkpoint only: the walk
        stops at the append commit that holds the checkpoint, or earlier, at
        an append whose segment this process read before (:data:`_SEGMENTS`):
        a process that reads a run again and again (the hook server, the MCP
        server) reads only what was appended since.
        """
        head = self._require_head() if head is None else head
        key = (self.repo.path, self.run, head)
        kept = _SEGMENTS.get(key)
        if kept is not None:
            # The newest append is the one a concurrent prune can hit: its
            # objects are checked on every read, as a walk would.
            self.check_named(self._commit(head))
            return list(kept)
        records = self._read_segment(head)
        _SEGMENTS.put(key, records)
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
            kept = _SEGMENTS.get((self.repo.path, self.run, CommitId(oid)))
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
        root (the plan, or the checkpoint a compaction left) and read it."""
        oid = head
        while True:
            commit = self._commit(oid)
            parents = commit.parent_ids
            if not parents:
                return self.plan(self._commit_records(commit)[0])
            oid = CommitId(str(parents[0]))

    def _require_head(self) -> CommitId:
        head = self.head()
        if head is None:
            raise UnknownRun(f"no log for run {self.run}", "list runs with `git wal runs`")
        return head

    def chain(self, head: CommitId) -> list[tuple[CommitId, list[Record]]]:
        """(commit, records) of every append from ``head`` back to the root, newest first."""
        out: list[tuple[CommitId, list[Record]]] = []
        oid: str | None = head
        while oid is not None:
            commit = self._commit(oid)
            out.append((CommitId(oid), self._commit_records(commit)))
            parents = commit.parent_ids
            if len(parents) > 1:
                raise self._corrupt(oid, "an append commit has more than one parent")
            oid = str(parents[0]) if parents else None
        return out

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
        """The records read are a chain: a plan (LSN 1) or checkpoint first, LSNs
        dense and in order, every closing closes an earlier open intent."""
        first = records[0] if records else None
        if not isinstance(first, (Plan, Checkpoint)):
            raise CorruptLog(
                f"log {self.ref_name}: the chain does not start with a plan or checkpoint",
                "the ref does not hold a gitwal log",
            )
        if isinstance(first, Plan) and first.lsn != 1:
            raise CorruptLog(f"log {self.ref_name}: the plan is not LSN 1", UNTRUSTED)
        for i, rec in enumerate(records, start=first.lsn):
            if rec.lsn != i:
                raise CorruptLog(
                    f"log {self.ref_name}: expected LSN {i}, found {rec.lsn} "
                    "(a record is missing, duplicated or out of order)",
                    "the chain was rewritten outside gitwal; do not resume from it",
                )
        self._check_closings(records)

    def _check_closings(self, records: list[Record]) -> None:
        """Every commit/abort closes an earlier intent of the records read, once.

        Readers fold the chain into "intent -> its closing"; a closing that
        names the plan, a checkpoint, itself, a later LSN or an intent closed
        already would make that fold lie (or fail), so it is refused here."""
        open_: set[int] = set()
        for rec in records:
            if isinstance(rec, Intent):
                open_.add(rec.lsn)
            elif isinstance(rec, (Commit, Abort)):
                if rec.intent not in open_:
                    raise CorruptLog(
                        f"log {self.ref_name} LSN {rec.lsn}: the {type_name(rec)} closes "
                        f"LSN {rec.intent}, which is not an earlier open intent of the log",
                        UNTRUSTED,
                    )
                open_.discard(rec.intent)

    def head_records(self, head: CommitId) -> list[Record]:
        """The records of the head append alone (cheap: one commit, one tree)."""
        if self._newest is not None and self._newest[0] == head:
            return list(self._newest[1])
        records = self._commit_records(self._commit(head))
        self._newest = (head, records)
        return list(records)

    def validated(self, head: CommitId) -> list[tuple[Record, bytes]]:
        """Every record from ``head`` back to the root, validated as a chain."""
        return self._walk(head, stop_at_checkpoint=False)

    def append_problem(self, oid: str) -> str | None:
        """Why one append cannot be trusted on its own (its commit, tree, a
        record or an object it names is missing or foreign), or None."""
        try:
            commit = self._commit(oid)
            self._commit_raw(commit)
            self.check_named(commit)
        except CorruptLog as e:
            return e.message
        return None

    def parents_present(self, head: CommitId) -> tuple[list[CommitId], bool]:
        """The commits from ``head`` back, newest first, as far as they exist;
        True when the walk reached the root (no commit on the way is missing)."""
        out: list[CommitId] = []
        oid: str | None = head
        while oid is not None:
            try:
                obj = self.repo.get(oid)
            except ValueError:
                obj = None
            if not isinstance(obj, pygit2.Commit):
                return out, False
            out.append(CommitId(oid))
            oid = str(obj.parent_ids[0]) if obj.parent_ids else None
        return out, True

    def check_named(self, commit: pygit2.Commit) -> None:
        """Every object the append names is present (the newest append is the
        one a concurrent prune can hit; cheap: one existence check each)."""
        odb = self.repo.odb
        for entry in commit.tree:
            if entry.id in odb:
                continue
            name = entry.name or ""
            if name.endswith(".json") and name[:LSN_DIGITS].isdigit():
                raise CorruptLog(f"{self._where(commit, int(name[:LSN_DIGITS]))}: record "
                                 "blob is missing or not a blob", repair_hint(self.run))
            raise CorruptLog(
                f"log {self.ref_name}: commit {str(commit.id)[:12]}: object "
                f"{str(entry.id)[:12]} ({name}) is missing from the repository",
                repair_hint(self.run))

    def _commit(self, oid: str | pygit2.Oid) -> pygit2.Commit:
        try:
            obj = self.repo.get(oid if isinstance(oid, pygit2.Oid) else pygit2.Oid(hex=oid))
        except ValueError:
            obj = None
        if obj is None:
            raise CorruptLog(f"log {self.ref_name}: commit {str(oid)[:12]}: object is "
                             "missing from the repository", repair_hint(self.run))
        if not isinstance(obj, pygit2.Commit):
            raise self._corrupt(str(oid), f"expected a commit, found a {obj.type_str}")
        return obj

    def _commit_records(self, commit: pygit2.Commit) -> list[Record]:
        """The records one append commit carries, in LSN order."""
        return [rec for rec, _ in self._commit_raw(commit)]

    def _commit_raw(self, commit: pygit2.Commit) -> list[tuple[Record, bytes]]:
        """(record, its canonical bytes) for every record blob of one append."""
        try:
            tree = commit.tree
        except (KeyError, pygit2.GitError):
            raise CorruptLog(f"log {self.ref_name}: commit {str(commit.id)[:12]}: its tree "
                             "is missing", repair_hint(self.run)) from None
        batch: list[tuple[Record, bytes]] = []
        for entry in tree:
            name = entry.name or ""
            # Entries sort by name: every record blob comes before obj-*.
            if not name[:1].isdigit():
                break
            if len(name) != RECORD_NAME_LEN or not name.endswith(".json") or not (
                    digits := name[:LSN_DIGITS]).isdigit() or not digits.isascii():
                continue
            lsn = int(digits)
            try:
                # The entry itself reads the blob (one lookup, not two); a
                # missing object or one that is not a blob raises.
                data = entry.data if isinstance(entry, pygit2.Blob) else None
            except (KeyError, ValueError, pygit2.GitError):
                data = None
            if data is None:
                raise CorruptLog(f"{self._where(commit, lsn)}: record blob is missing or "
                                 "not a blob", repair_hint(self.run))
            rec = decode(data, self._where(commit, lsn))
            if rec.lsn != lsn or rec.run != self.run:
                raise CorruptLog(
                    f"{self._where(commit, lsn)}: record names LSN {rec.lsn} of run {rec.run!r}",
                    "a foreign record was placed in this log; it is not trusted",
                )
            batch.append((rec, data))
        if not batch:
            raise self._corrupt(str(commit.id), "the append commit holds no record")
        return batch

    def _where(self, commit: pygit2.Commit, lsn: int) -> str:
        return f"{self.ref_name} LSN {lsn} (commit {str(commit.id)[:12]})"

    def _corrupt(self, oid: str, why: str) -> CorruptLog:
        return CorruptLog(
            f"log {self.ref_name}: commit {oid[:12]}: {why}",
            UNTRUSTED,
        )


class _Segments:
    """The segments this process read, by (repository, run, head commit).

    A commit id names its whole chain, so a kept segment is exact for its head
    and is never invalidated: an append, a compaction or a repair moves the
    ref to another commit, which is another key. Only the newest
    :data:`SEGMENTS_KEPT` used are kept. Thread-safe: the hook server reads
    runs from several threads.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str, str], tuple[Record, ...]] = {}
        self._guard = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[Record, ...] | None:
        with self._guard:
            kept = self._kept.pop(key, None)
            if kept is not None:
                self._kept[key] = kept  # now the newest used
            return kept

    def put(self, key: tuple[str, str, str], records: list[Record]) -> None:
        with self._guard:
            self._kept.pop(key, None)
            self._kept[key] = tuple(records)
            while len(self._kept) > SEGMENTS_KEPT:
                del self._kept[next(iter(self._kept))]  # the least recently used

    def clear(self) -> None:
        with self._guard:
            self._kept.clear()


_SEGMENTS = _Segments()
