"""Chain surgery on a run's log: the archives of compacted-away history, refs
created once (archives, detached checkpoints), a new chain from a checkpoint
on (compaction), the live ref moved to a non-descendant (compaction, repair,
fetch) or deleted (drop). checkpoint.py has the protocol.

The base of :class:`gitwal.log.store.Store`: every ref here moves by
compare-and-swap through the store's primitives, while the caller holds the
run lock, and a rewritten chain's objects are written and checked like an
append's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pygit2

from ..base.errors import CorruptLog, RunBusy, WalError
from ..base.ids import CommitId, Lsn
from ..records.model import Record
from .chain import Chain
from .packwrite import COMMIT, TREE, RawObject, tree_data, write_kept_pack

ARCHIVE_PREFIX = "refs/wal-archive/"  # refs/wal-archive/<run>/<n>: compacted-away history
CHECKPOINT_PREFIX = "refs/wal-checkpoints/"  # refs/wal-checkpoints/<run>/<lsn>: detached


class ChainSurgery(Chain):
    """Rewrites of a run's chain; :class:`gitwal.log.store.Store` provides these."""

    _common: Path

    def _move_ref(self, commit: pygit2.Oid, expect: CommitId | None) -> None:
        raise NotImplementedError

    def _check_survived(self, commit: pygit2.Oid, expect: CommitId | None,
                        oids: Sequence[str], what: str) -> None:
        raise NotImplementedError

    def _commit_content(self, tree: str, parents: Sequence[str], message: bytes,
                        like: pygit2.Commit | None = None) -> bytes:
        raise NotImplementedError

    def _refuse_after_seal(self, head: CommitId, doing: str = "appended to") -> None:
        raise NotImplementedError

    def _sync_ref_dirs(self, name: str) -> None:
        raise NotImplementedError

    def _moved_msg(self) -> str:
        raise NotImplementedError

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
        dropped = {f"{rec.lsn:012d}.json" for rec in root_batch if rec.lsn < lsn}
        entries = [(str(e.name), int(e.filemode), str(e.id)) for e in root.tree]
        tree = RawObject(TREE, tree_data(e for e in entries if e[0] not in dropped))
        # Written as one kept pack, like appends: no gc can take the new
        # chain's objects before or after the live ref names them.
        objects = [tree]
        parents: list[str] = []
        for i, (oid, _batch) in enumerate(keep):
            old = self._commit(oid)
            # Re-signed like any append: a compacted chain stays verifiable.
            content = self._commit_content(tree.oid if i == 0 else str(old.tree_id),
                                           parents, old.raw_message, old)
            objects.append(RawObject(COMMIT, content))
            parents = [objects[-1].oid]
        try:
            write_kept_pack(self._common / "objects", objects)
        except OSError as e:
            raise WalError(f"could not write the compacted chain of run {self.run}: {e}",
                           "nothing was changed; run the command again") from e
        return CommitId(parents[0])

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
