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
* LSNs are dense: the n-th record of a run has LSN n;
* an append whose objects a concurrent ``git gc --prune=now`` removed before
  its ref moved is undone (the ref is swapped back) and reported, so the ref
  never stays on a commit that names missing objects (docs/recovery.md).

The run lock and exec command locks live in the common git dir, seen from
every worktree (locks.py).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import pygit2

from .authorship import attach
from .chain import REF_PREFIX, Chain, common_dir
from .durable import crash_point, fsync_dir
from .errors import CorruptLog, RunBusy, WalError
from .ids import CommitId, Lsn, RunId
from .locks import config_wait_timeout, lock_dir, run_lock, tell
from .records import Intent, Record, Seal, encode, summary

if TYPE_CHECKING:
    from .keys import SigningKey

ARCHIVE_PREFIX = "refs/wal-archive/"  # refs/wal-archive/<run>/<n>: compacted-away history
CHECKPOINT_PREFIX = "refs/wal-checkpoints/"  # refs/wal-checkpoints/<run>/<lsn>: detached
_SIGNATURE = ("gitwal", "gitwal@localhost")

pygit2.settings.enable_fsync_gitdir(True)


def wal_dir(repo: pygit2.Repository) -> Path:
    """gitwal's private directory inside this worktree's git dir (``current``)."""
    return Path(repo.path) / "wal"


class RunSealed(WalError):
    """The run ends in a seal: nothing may be appended to it, nor its chain rewritten."""


class AppendLost(WalError):
    """A concurrent ``git gc --prune=now`` removed objects of an append; it was undone."""


_T = TypeVar("_T")
_WRITE_TRIES = 3


def _writing(run: str, write: Callable[[], _T]) -> _T:
    """Write objects, trying again when a concurrent ``git gc`` pulled a
    directory from under libgit2 (it prunes empty ``objects/xx`` dirs); a
    write of the same content is idempotent. Still failing: a WalError."""
    for attempt in range(_WRITE_TRIES):
        try:
            return write()
        except (pygit2.GitError, OSError) as e:
            if attempt == _WRITE_TRIES - 1:
                raise WalError(
                    f"could not write objects for run {run}: {e}",
                    "nothing was appended by this write; run the command again (if it "
                    f"left a step open, `git wal recover --run {run}` first); a concurrent "
                    "`git gc --prune=now` can cause this",
                ) from e
    raise AssertionError("not reached")


@dataclass(frozen=True)
class Ref:
    """An object a record names, to be kept reachable from the append commit."""

    oid: str
    is_tree: bool = False


class Store(Chain):
    """Appends to (and, through :class:`Chain`, reads) the records of one run."""

    def __init__(self, repo: pygit2.Repository, run: RunId) -> None:
        super().__init__(repo, run)
        self._gitdir = Path(repo.path)
        self._common = common_dir(repo)
        self._synced_nlink = -1  # st_nlink of objects/ at our last fsync of it
        self._key: SigningKey | Literal[False] | None = False  # False: not looked up yet
        # How long ``locked()`` waits: "config" reads wal.waitTimeout; None waits for ever.
        self.wait_timeout: float | Literal["config"] | None = "config"
        self.notify: Callable[[str], None] = tell  # says who holds the lock while we wait

    # -- writing -----------------------------------------------------------

    @contextmanager
    def locked(self, wait: bool = True, timeout: float | None = None) -> Iterator[None]:
        """Hold this run's advisory lock: one live gitwal writer per run.

        The kernel drops the lock when the holder dies (even by SIGKILL), so a
        ``refs/wal/<run>.lock`` found while we hold it is stale by definition.
        ``wait``: False refuses at once when the lock is held; otherwise wait
        up to ``timeout`` seconds (None: :attr:`wait_timeout`), saying after a
        second who holds it (gitwal/locks.py).
        """
        limit = timeout if timeout is not None else (
            config_wait_timeout(self.repo) if self.wait_timeout == "config"
            else self.wait_timeout)
        with run_lock(lock_dir(self.repo) / f"{self.run}.lock", self.run, wait, limit,
                      self.notify):
            yield

    def _command_lock(self, lsn: Lsn) -> Path:
        return lock_dir(self.repo) / f"{self.run}.{lsn}.cmd"

    @contextmanager
    def command_lock(self, lsn: Lsn) -> Iterator[int]:
        """An exclusive lock for an exec step's command; yields its fd.

        The command inherits the fd, and a flock belongs to the open file, not
        the process: the lock stays held while the command, or anything it
        started, lives, even after the gitwal process that ran it was killed.
        Recovery must not decide the step while it is held
        (:meth:`command_running`), from whichever worktree it runs. The lock
        is not durable (after a power loss no command runs); the file's
        existence is, before the command starts (:meth:`command_started`).
        """
        path = self._command_lock(lsn)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Durable before the command starts: recovery reads "no lock file"
            # as "the command never started" (command_started).
            fsync_dir(path.parent)
            yield fd
        finally:
            os.close(fd)

    def command_started(self, lsn: Lsn) -> bool:
        """Whether exec step ``lsn``'s command may have started: its lock file
        exists (made durable before the command runs, removed once the step
        is closed)."""
        return self._command_lock(lsn).exists()

    def command_running(self, lsn: Lsn) -> Path | None:
        """The lock file of exec step ``lsn`` if a process still holds it."""
        path = self._command_lock(lsn)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return path
        finally:
            os.close(fd)
        return None

    def clear_command_lock(self, lsn: Lsn) -> None:
        self._command_lock(lsn).unlink(missing_ok=True)

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
        return str(_writing(self.run, lambda: self.repo.create_blob(data)))

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
        if expect is not None:
            self._refuse_after_seal(expect)
        # Every intent that carries a command gets this clone's proof that the
        # local user wrote it; only such commands are ever run (authorship.py).
        records = [attach(self.repo, r) if isinstance(r, Intent) else r for r in records]
        tb = self.repo.TreeBuilder()
        for rec in records:
            blob = self.put_blob(encode(rec))
            tb.insert(f"{rec.lsn:012d}.json", blob, pygit2.GIT_FILEMODE_BLOB)
        for r in refs:
            mode = pygit2.GIT_FILEMODE_TREE if r.is_tree else pygit2.GIT_FILEMODE_BLOB
            try:
                tb.insert(f"obj-{r.oid}", pygit2.Oid(hex=r.oid), mode)
            except (pygit2.GitError, ValueError):
                # Written moments ago, unreachable until this append: pruned.
                raise AppendLost(
                    f"object {r.oid[:12]} for the next append to run {self.run} is missing "
                    "(removed by a concurrent `git gc --prune=now` before the append); "
                    "nothing was appended", "run the command again",
                ) from None
        tree = _writing(self.run, tb.write)
        sig = pygit2.Signature(*_SIGNATURE)
        parents = [pygit2.Oid(hex=expect)] if expect else []
        message = summary(records[-1]) + "\n"
        commit = _writing(self.run,
                          lambda: self._write_commit(sig, sig, message, tree, parents))
        self._sync_objects_dir()
        crash_point("mid-append")
        self._move_ref(commit, expect)
        crash_point("after-append")
        written = self.repo[tree]
        assert isinstance(written, pygit2.Tree)
        named = [str(e.id) for e in written]
        self._check_survived(commit, expect, [str(commit), str(tree), *named],
                             f"LSN {records[0].lsn}" + (
                                 f"..{records[-1].lsn}" if len(records) > 1 else ""))
        self._newest = (str(commit), list(records))
        return CommitId(str(commit))

    def _check_survived(self, commit: pygit2.Oid, expect: CommitId | None,
                        oids: Sequence[str], what: str) -> None:
        """Undo an append whose objects a concurrent ``git gc`` pruned, and say so.

        gc walks the refs at one instant, then deletes every loose object it
        did not reach; the objects of an append are unreachable until its ref
        moves. Checked after the move: an object missing now was pruned, and
        the previous head (the ref gc saw) is intact, so the ref goes back to
        it. A fresh object database answers, not this process's cached list
        of packs (gc may have deleted a pack we still have mapped). What is
        left: a prune that deletes an object after this check but walked the
        refs before the move (docs/recovery.md, "Repair").
        """
        odb = pygit2.Odb(str(self._common / "objects"))
        missing = [o for o in oids if pygit2.Oid(hex=o) not in odb]
        if not missing:
            return
        ref = self.repo.references.get(self.ref_name)
        if ref is not None and ref.target == commit:
            if expect is None:
                ref.delete()
            else:
                ref.set_target(pygit2.Oid(hex=expect), "gitwal: append undone (objects pruned)")
            self._sync_ref_dirs(self.ref_name)
        back = f"back at {expect[:12]}" if expect else "not created"
        raise AppendLost(
            f"the append of {what} to run {self.run} was undone: {len(missing)} of its "
            f"objects (first {missing[0][:12]}) were removed by a concurrent `git gc "
            f"--prune=now` before the log's ref named them; the log is {back}",
            f"run the command again (if it left a step open, `git wal recover --run "
            f"{self.run}` first); avoid `git gc --prune=now` while gitwal writes",
        )

    def _refuse_after_seal(self, head: CommitId, doing: str = "appended to") -> None:
        """Nothing may follow a seal (docs/format.md); every append comes through here."""
        last = self.head_records(head)[-1]
        if isinstance(last, Seal):
            raise RunSealed(f"run {self.run} is sealed (LSN {last.lsn}): it cannot be {doing}",
                            "a sealed run is finished; start a new one with `git wal begin`")

    def _write_commit(self, author: pygit2.Signature, committer: pygit2.Signature,
                      message: str, tree: pygit2.Oid, parents: list[pygit2.Oid]) -> pygit2.Oid:
        """An append commit (no ref moved), SSH-signed when a key is configured."""
        key = self.signing_key()
        if key is None:
            return self.repo.create_commit(None, author, committer, message, tree, parents)
        from .signing import create_signed_commit

        return create_signed_commit(self.repo, key, tree, parents, author, committer, message)

    def signing_key(self) -> SigningKey | None:
        """The key named by ``git config wal.signingKey``, loaded once; None: unsigned."""
        if self._key is False:
            try:
                path = str(self.repo.config["wal.signingKey"])
            except KeyError:
                self._key = None
            else:
                from .keys import load_key  # cryptography only when signing

                self._key = load_key(Path(os.path.expanduser(path)))
        return self._key or None

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
            if "doesn't exist" in str(e) or "does not exist" in str(e):
                # libgit2 checks the target: pruned between its write and now.
                raise AppendLost(
                    f"commit {str(commit)[:12]} for run {self.run} was removed by a "
                    "concurrent `git gc --prune=now` before the log's ref could name it; "
                    "nothing was appended", "run the command again",
                ) from None
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
        self._refuse_after_seal(head, "compacted")  # the seal names the append it follows
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
            # Re-signed like any append: a compacted chain stays verifiable.
            new = self._write_commit(old.author, old.committer, old.message,
                                     tree if i == 0 else old.tree_id, parent)
            parent = [new]
        self._sync_objects_dir()
        return CommitId(str(parent[0]))

    def move_head(self, expect: CommitId, new: CommitId) -> None:
        """Compare-and-swap the live ref, also to a non-descendant (compaction, repair).

        A compacted chain's commits were written just now, unreachable until
        this move: every commit and tree of the new chain is checked as an
        append's objects are (cheap: one existence check each).
        """
        self._move_ref(pygit2.Oid(hex=new), expect)
        oids: list[str] = []
        oid: str | None = new
        while oid is not None:
            oids.append(oid)
            commit = self.repo.get(oid)
            if not isinstance(commit, pygit2.Commit):
                break  # reported as missing by the check below
            oids.append(str(commit.tree_id))
            oid = str(commit.parent_ids[0]) if commit.parent_ids else None
        self._check_survived(pygit2.Oid(hex=new), expect, oids, "a rewritten chain")

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


def list_runs(repo: pygit2.Repository) -> list[RunId]:
    """Run ids with a log, oldest first (run ids sort by time)."""
    names = [r[len(REF_PREFIX) :] for r in repo.references if r.startswith(REF_PREFIX)]
    return [RunId(n) for n in sorted(names)]
