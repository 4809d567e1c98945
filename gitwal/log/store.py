"""The log of one run: a chain of append commits under ``refs/wal/<run>``.

This module is the only writer of ``refs/wal/*``. Layout (docs/format.md):
each append is one commit, parent = the previous append, whose tree holds

* ``<lsn:012d>.json``: one blob per record appended, canonical JSON;
* ``obj-<oid>``: every object those records name (pre/post images, the trees
  of a shell step), so that the log's ref keeps them alive through ``git gc``.

Invariants kept here:

* an append is visible only once durable: its objects are written as one
  kept pack (packwrite.py), fsynced, before the ref moves;
* the ref moves by compare-and-swap against the head the writer read, under
  an advisory lock this process holds, so no record is lost or reordered;
* LSNs are dense: the n-th record of a run has LSN n;
* no ``git gc`` removes an append's objects (keepalive.py): an append
  whose named objects a prune took anyway is undone, the ref swapped back.

Rewrites of the chain (compaction, drop, repair) are in rewrite.py, whose
:class:`~gitwal.log.rewrite.ChainSurgery` this module's :class:`Store` extends.

The run lock (locks.py) and exec command locks (command_locks.py) live in
the common git dir, seen from every worktree; their mixins, like rewrite.py's,
are bases of :class:`Store` and move no ref themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import pygit2

from ..base.crashpoints import crash_point
from ..base.durable import fsync_dir
from ..base.errors import RunBusy, WalError
from ..base.ids import CommitId, RunId
from ..base.repository import common_dir
from ..records.codec import encode
from ..records.model import Record, Seal, summary
from .authorship import attach
from .command_locks import CommandLocks
from .groupcommit import Deferred, GroupCommit
from .keepalive import AppendLost, gather_loose, head_tree, merge_packs, pruned
from .keepalive import Ref as Ref  # where every step module imports it from
from .locks import RunLocking, tell
from .packwrite import (
    BLOB,
    COMMIT,
    MODE_BLOB,
    MODE_TREE,
    TREE,
    RawObject,
    Signer,
    commit_data,
    object_id,
    tree_data,
    with_signature,
    write_kept_pack,
)
from .replica import Replica
from .rewrite import ChainSurgery

_SIGNATURE = ("gitwal", "gitwal@localhost")

pygit2.settings.enable_fsync_gitdir(True)


class RunSealed(WalError):
    """The run ends in a seal: nothing may be appended to it, nor its chain rewritten."""


def _ident(sig: pygit2.Signature) -> bytes:
    """``Name <email> time +hhmm``, as a commit header holds it."""
    sign = "-" if sig.offset < 0 else "+"
    hours, minutes = divmod(abs(sig.offset), 60)
    return f"{sig.name} <{sig.email}> {sig.time} {sign}{hours:02d}{minutes:02d}".encode()


class Store(GroupCommit, ChainSurgery, CommandLocks, RunLocking):
    """Appends to (and, through :class:`Chain`, reads) the records of one run;
    rewrites of its chain: :class:`~gitwal.log.rewrite.ChainSurgery`; its
    locks: :class:`~gitwal.log.command_locks.CommandLocks`,
    :class:`~gitwal.log.locks.RunLocking`."""

    def __init__(self, repo: pygit2.Repository, run: RunId,
                 signer: Signer | None = None) -> None:
        super().__init__(repo, run)
        self._gitdir = Path(repo.path)
        self._common = common_dir(repo)
        # Signs every append commit when given (signing/signer.py); None: unsigned.
        self.signer = signer
        self._kept: set[str] = set()  # named objects this store copied into kept packs
        # New blobs (put_blob) not yet in the repository: born in the kept pack
        # of the append whose refs name them, never written loose.
        self._staged: dict[str, bytes] = {}
        # How long ``locked()`` waits: "config" reads wal.waitTimeout; None waits for ever.
        self.wait_timeout: float | Literal["config"] | None = "config"
        self.notify: Callable[[str], None] = tell  # says who holds the lock while we wait
        # Told of every append once it is durable (remote/replicate.py); None: no remote.
        self.replica: Replica | None = None
        self.holding = 0  # RunLocking: > 0 while this store holds the run lock
        self._deferred: Deferred | None = None  # group commit (groupcommit.py)

    # -- writing -----------------------------------------------------------

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
        """The blob id of ``data``. A new blob is born in the kept pack of the
        next append whose refs name it (no loose object, no fsync of its own);
        until then it exists only in this process."""
        oid = object_id(BLOB, data)
        if pygit2.Oid(hex=oid) not in self.repo.odb:
            self._staged[oid] = data
        return oid

    def append(self, records: Sequence[Record], refs: Sequence[Ref],
               expect: CommitId | None) -> CommitId:
        """Append ``records`` in one commit, moving the ref from ``expect``.

        Raises :class:`RunBusy` when the ref is no longer at ``expect``: the
        caller re-reads and decides; nothing is overwritten.
        """
        d = self._deferred
        if d is not None and expect == d.head:
            if records and records[0].lsn != d.records[-1].lsn + 1:
                raise WalError(f"run {self.run}: LSN {records[0].lsn} would follow the held-back "
                               f"LSN {d.records[-1].lsn}", "read the head with tail()")
            records, refs = [*d.records, *records], [*d.refs, *refs]
        if expect is not None:
            self._refuse_after_seal(expect)
        # Every record that may authorize something (an intent, commit, abort,
        # approval, claim) gets this clone's proof that it wrote it; only such
        # records act here (authorship.py, trust/authority.py).
        records = [attach(self.repo, r) for r in records]
        objects: list[RawObject] = []
        entries: list[tuple[str, int, str]] = []
        for rec in records:
            blob = RawObject(BLOB, encode(rec))
            objects.append(blob)
            entries.append((f"{rec.lsn:012d}.json", MODE_BLOB, blob.oid))
        exposed: list[str] = []  # named objects packed elsewhere: gc may still drop them
        for r in refs:
            entries.append((f"obj-{r.oid}", MODE_TREE if r.is_tree else MODE_BLOB, r.oid))
            if r.oid in self._kept:
                continue  # in a kept pack already (an intent's images, named again by its commit)
            staged = self._staged.get(r.oid)
            if staged is not None:
                objects.append(RawObject(BLOB, staged))
                continue
            if not gather_loose(self.repo, self._common, self.run, r.oid, r.is_tree, objects,
                                head_tree(self.repo) if r.is_tree else None):
                exposed.append(r.oid)
        tree = RawObject(TREE, tree_data(entries))
        message = (summary(records[-1]) + "\n").encode()
        commit = RawObject(COMMIT, self._commit_content(tree.oid, [expect] if expect else [],
                                                        message))
        objects += [tree, commit]
        # One kept pack: no gc can delete these objects, before or after the
        # ref names them (packwrite.py); durable when it returns.
        try:
            write_kept_pack(self._common / "objects", objects)
        except OSError as e:
            raise WalError(f"could not write objects for run {self.run}: {e}",
                           "nothing was appended; run the command again") from e
        self._kept.update(r.oid for r in refs if r.oid not in exposed)
        for r in refs:
            self._staged.pop(r.oid, None)  # durable in the pack now
        crash_point("mid-append")
        oid = pygit2.Oid(hex=commit.oid)
        self._move_ref(oid, expect)
        crash_point("after-append")
        if exposed:
            self._check_survived(oid, expect, exposed, f"LSN {records[0].lsn}" + (
                f"..{records[-1].lsn}" if len(records) > 1 else ""))
        self._newest = (commit.oid, list(records))
        self._release()  # carried, or the log had moved past it (the CAS held)
        merge_packs(self.repo, self._common)
        if self.replica is not None:
            self.replica.appended(self.run, CommitId(commit.oid))
        return CommitId(commit.oid)

    def _commit_content(self, tree: str, parents: Sequence[str], message: bytes,
                        like: pygit2.Commit | None = None) -> bytes:
        """An append commit's content, SSH-signed when a key is configured;
        ``like``: keep that commit's author and committer (a rewritten chain)."""
        author = _ident(like.author if like else pygit2.Signature(*_SIGNATURE))
        committer = _ident(like.committer) if like else author
        content = commit_data(tree, parents, author, message, committer)
        if self.signer is None:
            return content
        return with_signature(content, self.signer.sign(content))

    def _check_survived(self, commit: pygit2.Oid, expect: CommitId | None,
                        oids: Sequence[str], what: str) -> None:
        """Undo an append whose named objects a concurrent ``git gc`` pruned.

        ``oids``: objects the append names without a copy in a kept pack (they
        sat in an ordinary pack, which a gc whose walk came before the ref
        moved may rewrite without them). Checked after the move: one missing
        now was pruned, and the previous head is intact, so the ref goes back
        to it (keepalive.pruned).
        """
        missing = pruned(self._common, oids)
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
