"""The log of one run: a chain of append commits under ``refs/wal/<run>``.

This module is the only writer of ``refs/wal/*``. Layout (docs/format.md):
each append is one commit, parent = the previous append, whose tree holds

* ``<lsn:012d>.json``: one blob per record appended, canonical JSON;
* ``obj-<oid>``: every object those records name (pre/post images, the trees
  of a shell step), so that the log's ref keeps them alive through ``git gc``.

Invariants kept here:

* an append is visible only once durable: objects are fsynced (libgit2's
  fsync mode plus the directories it does not sync) before the ref moves;
* the ref moves by compare-and-swap against the head the writer read, under
  an advisory lock this process holds, so no record is lost or reordered;
* LSNs are dense: the n-th record of a run has LSN n.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2

from .durable import crash_point, fsync_dir, makedirs_durable
from .errors import CorruptLog, RunBusy, UnknownRun
from .ids import CommitId, Lsn, RunId
from .records import Checkpoint, Plan, Record, decode, encode, summary

REF_PREFIX = "refs/wal/"
ARCHIVE_PREFIX = "refs/wal-archive/"  # refs/wal-archive/<run>/<n>: compacted-away history
CHECKPOINT_PREFIX = "refs/wal-checkpoints/"  # refs/wal-checkpoints/<run>/<lsn>: detached
_RECORD_NAME = re.compile(r"(\d{12})\.json")
_SIGNATURE = ("gitwal", "gitwal@localhost")
_UNTRUSTED = "the log was damaged or rewritten outside gitwal; nothing past it is trusted"

pygit2.settings.enable_fsync_gitdir(True)


def wal_dir(repo: pygit2.Repository) -> Path:
    """gitwal's private directory inside this worktree's git dir."""
    return Path(repo.path) / "wal"


@dataclass(frozen=True)
class Ref:
    """An object a record names, to be kept reachable from the append commit."""

    oid: str
    is_tree: bool = False


class Store:
    """Reads and appends the records of one run."""

    def __init__(self, repo: pygit2.Repository, run: RunId) -> None:
        self.repo = repo
        self.run = run
        self.ref_name = REF_PREFIX + run
        self._gitdir = Path(repo.path)
        self._common = Path(_common_dir(repo))
        self._synced_nlink = -1  # st_nlink of objects/ at our last fsync of it

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

    def segment(self) -> list[Record]:
        """Records from the newest checkpoint on (all records if there is none).

        The cost depends on the records after the checkpoint only: the walk
        stops at the append commit that holds the checkpoint.
        """
        return [rec for rec, _ in self._walk(self._require_head(), stop_at_checkpoint=True)]

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
                             _UNTRUSTED) from None
        assert isinstance(blob, pygit2.Blob)
        plan = decode(blob.data, f"{self.ref_name} plan")
        if not isinstance(plan, Plan) or plan.run != self.run:
            raise CorruptLog(f"log {self.ref_name}: the checkpoint names no plan of this run",
                             _UNTRUSTED)
        return plan

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
        first = out[0][0] if out else None
        if not isinstance(first, (Plan, Checkpoint)):
            raise CorruptLog(
                f"log {self.ref_name}: the chain does not start with a plan or checkpoint",
                "the ref does not hold a gitwal log",
            )
        if isinstance(first, Plan) and first.lsn != 1:
            raise CorruptLog(f"log {self.ref_name}: the plan is not LSN 1", _UNTRUSTED)
        for i, (rec, _) in enumerate(out, start=first.lsn):
            if rec.lsn != i:
                raise CorruptLog(
                    f"log {self.ref_name}: expected LSN {i}, found {rec.lsn} "
                    "(a record is missing, duplicated or out of order)",
                    "the chain was rewritten outside gitwal; do not resume from it",
                )
        return out

    def head_records(self, head: CommitId) -> list[Record]:
        """The records of the head append alone (cheap: one commit, one tree)."""
        return self._commit_records(self._commit(head))

    def _commit(self, oid: str | pygit2.Oid) -> pygit2.Commit:
        try:
            obj = self.repo.get(oid if isinstance(oid, pygit2.Oid) else pygit2.Oid(hex=oid))
        except ValueError:
            obj = None
        if obj is None:
            raise self._corrupt(str(oid), "object is missing from the repository")
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
            raise self._corrupt(str(commit.id), "its tree is missing") from None
        batch: list[tuple[Record, bytes]] = []
        for entry in tree:
            name = entry.name or ""
            m = _RECORD_NAME.fullmatch(name)
            if m is None:
                if name[:1].isdigit():
                    continue
                break  # entries sort by name: every record blob comes before obj-*
            lsn = int(m.group(1))
            try:
                blob = self.repo.get(entry.id)
            except ValueError:
                blob = None
            if not isinstance(blob, pygit2.Blob):
                raise CorruptLog(f"{self._where(commit, lsn)}: record blob is missing or "
                                 "not a blob", _UNTRUSTED)
            data = blob.data
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
            _UNTRUSTED,
        )

    # -- writing -----------------------------------------------------------

    @contextmanager
    def locked(self, wait: bool = True) -> Iterator[None]:
        """Hold this run's advisory lock: one live gitwal writer per run.

        The kernel drops the lock when the holder dies (even by SIGKILL), so a
        ``refs/wal/<run>.lock`` found while we hold it is stale by definition.
        """
        lock_dir = wal_dir(self.repo) / "locks"
        if not lock_dir.is_dir():
            makedirs_durable(lock_dir)
        fd = os.open(lock_dir / f"{self.run}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise RunBusy(
                    f"run {self.run} is in use by another live gitwal process",
                    "wait for it to finish, or stop it, then run the command again",
                ) from None
            yield
        finally:
            os.close(fd)

    def stale_ref_lock(self) -> Path | None:
        """A leftover ``refs/wal/<run>.lock`` (call only while holding :meth:`locked`)."""
        path = self._common / (self.ref_name + ".lock")
        return path if path.exists() else None

    def clear_stale_ref_lock(self) -> bool:
        path = self.stale_ref_lock()
        if path is None:
            return False
        path.unlink()
        fsync_dir(path.parent)
        return True

    def put_blob(self, data: bytes) -> str:
        """Write a blob durably (libgit2 fsyncs the file and its fan-out dir)."""
        return str(self.repo.create_blob(data))

    def append(
        self,
        records: Sequence[Record],
        refs: Sequence[Ref],
        expect: CommitId | None,
    ) -> CommitId:
        """Append ``records`` in one commit, moving the ref from ``expect``.

        Raises :class:`RunBusy` when the ref is no longer at ``expect``: the
        caller re-reads and decides; nothing is overwritten.
        """
        tb = self.repo.TreeBuilder()
        for rec in records:
            blob = self.put_blob(encode(rec))
            tb.insert(f"{rec.lsn:012d}.json", blob, pygit2.GIT_FILEMODE_BLOB)
        for r in refs:
            mode = pygit2.GIT_FILEMODE_TREE if r.is_tree else pygit2.GIT_FILEMODE_BLOB
            tb.insert(f"obj-{r.oid}", pygit2.Oid(hex=r.oid), mode)
        tree = tb.write()
        sig = pygit2.Signature(*_SIGNATURE)
        parents = [pygit2.Oid(hex=expect)] if expect else []
        message = summary(records[-1]) + "\n"
        commit = self.repo.create_commit(None, sig, sig, message, tree, parents)
        self._sync_objects_dir()
        crash_point("mid-append")
        self._move_ref(commit, expect)
        crash_point("after-append")
        return CommitId(str(commit))

    def _sync_objects_dir(self) -> None:
        """Make the objects/xx entries our objects went into durable.

        libgit2 (fsync mode) syncs each object file and its objects/xx dir,
        but not objects/ when it had to create objects/xx -- and another
        program may have created objects/xx without syncing either. One fsync
        of objects/ makes every fan-out dir that exists at that moment
        durable, so it is needed again only when a fan-out dir has appeared
        since (st_nlink counts subdirectories; where it reads 1, as on btrfs,
        always sync).
        """
        objects = self._common / "objects"
        nlink = os.stat(objects).st_nlink
        if nlink < 2 or nlink != self._synced_nlink:
            fsync_dir(objects)
            self._synced_nlink = nlink

    def _move_ref(self, commit: pygit2.Oid, expect: CommitId | None) -> None:
        refs_wal = self._common / "refs" / "wal"
        new_dir = not refs_wal.is_dir()
        try:
            if expect is None:
                self.repo.references.create(self.ref_name, commit, force=False)
            else:
                ref = self.repo.references[self.ref_name]
                if str(ref.target) != expect:
                    raise RunBusy(self._moved_msg(), "re-read the log and try again")
                # set_target is libgit2's create_matching against the value
                # read above: a compare-and-swap, not a blind overwrite.
                ref.set_target(commit, "gitwal append")
        except pygit2.AlreadyExistsError:
            raise RunBusy(self._moved_msg(), "re-read the log and try again") from None
        except pygit2.GitError as e:
            if "does not match" in str(e):
                raise RunBusy(self._moved_msg(), "re-read the log and try again") from None
            raise
        except OSError as e:
            if "lock" in str(e):
                raise RunBusy(
                    f"the ref {self.ref_name} is locked ({self.ref_name}.lock exists)",
                    "if no git process is running, `git wal recover` clears a stale lock",
                ) from None
            raise
        # libgit2 (fsync mode) fsyncs refs/wal/ after renaming the lock over
        # the ref; only a refs/wal/ it had to create needs its parent synced.
        if new_dir:
            fsync_dir(refs_wal)
            fsync_dir(refs_wal.parent)

    # -- chain surgery (compaction, drop): see checkpoint.py for the protocol

    def archives(self) -> list[tuple[int, CommitId]]:
        """(n, head) of every archived segment of this run, oldest first."""
        prefix = f"{ARCHIVE_PREFIX}{self.run}/"
        out = []
        for name in self.repo.references:
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                target = self.repo.references[name].target
                out.append((int(name[len(prefix) :]), CommitId(str(target))))
        return sorted(out)

    def create_ref(self, name: str, target: str, force: bool = False) -> None:
        """Create a ref durably; one that exists already is an error unless ``force``."""
        try:
            self.repo.references.create(name, pygit2.Oid(hex=target), force=force)
        except pygit2.AlreadyExistsError:
            raise RunBusy(f"{name} already exists",
                          "another process did the same; re-run the command") from None
        self._sync_ref_dirs(name)

    def rewrite_from(self, head: CommitId, lsn: Lsn) -> CommitId:
        """A new chain holding the records from ``lsn`` on, reusing the append trees.

        The new root holds the record at ``lsn`` (a checkpoint) and the rest
        of its batch; every later append keeps its tree, message and order.
        """
        chain = self.chain(head)
        keep: list[tuple[CommitId, list[Record]]] = []
        for oid, batch in chain:
            keep.append((oid, batch))
            if batch[0].lsn <= lsn:
                break
        else:
            raise CorruptLog(f"log {self.ref_name}: no record {lsn} to start from")
        keep.reverse()
        root_oid, root_batch = keep[0]
        root = self._commit(root_oid)
        tb = self.repo.TreeBuilder(root.tree)
        for rec in root_batch:
            if rec.lsn < lsn:
                tb.remove(f"{rec.lsn:012d}.json")
        parent: list[pygit2.Oid] = []
        tree = tb.write()
        for i, (oid, _batch) in enumerate(keep):
            old = self._commit(oid)
            new = self.repo.create_commit(
                None, old.author, old.committer, old.message,
                tree if i == 0 else old.tree_id, parent,
            )
            parent = [new]
        self._sync_objects_dir()
        return CommitId(str(parent[0]))

    def move_head(self, expect: CommitId, new: CommitId) -> None:
        """Compare-and-swap the live ref, also to a non-descendant (compaction)."""
        self._move_ref(pygit2.Oid(hex=new), expect)

    def delete_live(self, expect: CommitId) -> None:
        """Delete the live ref if it still points at ``expect`` (caller holds the lock)."""
        ref = self.repo.references.get(self.ref_name)
        if ref is None or str(ref.target) != expect:
            raise RunBusy(self._moved_msg(), "re-read the log and try again")
        ref.delete()
        self._sync_ref_dirs(self.ref_name)

    def _sync_ref_dirs(self, name: str) -> None:
        """fsync every directory from refs/ down to the ref's own (some may be new)."""
        d = (self._common / name).parent
        dirs = []
        while d != self._common:
            dirs.append(d)
            d = d.parent
        for d in dirs:
            if d.is_dir():
                fsync_dir(d)

    def _moved_msg(self) -> str:
        return f"the log {self.ref_name} moved while this process was appending"


def _common_dir(repo: pygit2.Repository) -> str:
    """The git dir shared by all worktrees (refs and objects live there)."""
    gitdir = Path(repo.path)
    common = gitdir / "commondir"
    if common.exists():
        return str((gitdir / common.read_text().strip()).resolve())
    return str(gitdir)


def list_runs(repo: pygit2.Repository) -> list[RunId]:
    """Run ids with a log, oldest first (run ids sort by time)."""
    names = [r[len(REF_PREFIX) :] for r in repo.references if r.startswith(REF_PREFIX)]
    return [RunId(n) for n in sorted(names)]
