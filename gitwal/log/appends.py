"""Reading one append commit of a run's log: its records, decoded and checked.

An append is one commit under ``refs/wal/<run>`` whose tree holds record blobs
named ``<lsn:012d>.json`` (sorted first) and the objects they name
(docs/format.md). Every record is validated as it is read: a corrupt or
foreign record raises :class:`CorruptLog`, it is never trusted. chain.py
walks appends into a run's chain; store.py is the only writer.
"""

from __future__ import annotations

import pygit2

from ..base.errors import CorruptLog
from ..base.ids import CommitId, RunId
from ..records.codec import decode
from ..records.model import Record

REF_PREFIX = "refs/wal/"
LSN_DIGITS = 12
RECORD_NAME_LEN = LSN_DIGITS + len(".json")  # <lsn:012d>.json
UNTRUSTED = "the log was damaged or rewritten outside gitwal; nothing past it is trusted"


def repair_hint(run: str) -> str:
    """For a log whose objects are missing (a concurrent `git gc --prune=now`, a disk)."""
    return (f"objects of the log are missing; `git wal repair {run}` cuts the log back to "
            "its newest intact record (and says what was lost)")


class AppendReader:
    """Reads single append commits of one run (the base of :class:`Chain`)."""

    def __init__(self, repo: pygit2.Repository, run: RunId) -> None:
        self.repo = repo
        self.run = run
        self.ref_name = REF_PREFIX + run

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
        return self._tree_raw(str(commit.id), commit.tree_id)

    def _tree_raw(self, commit: str, tree_id: pygit2.Oid) -> list[tuple[Record, bytes]]:
        """The records of the append ``commit`` whose tree is ``tree_id``.

        Read from the raw tree (``<mode> <name>\\0<20-byte id>`` entries, sorted
        by name): no object wrappers, one database read per record blob."""
        odb = self.repo.odb
        try:
            kind, data = odb.read(tree_id)
        except (KeyError, ValueError, pygit2.GitError):
            kind, data = None, b""
        if kind != pygit2.enums.ObjectType.TREE:
            raise CorruptLog(f"log {self.ref_name}: commit {commit[:12]}: its tree "
                             "is missing", repair_hint(self.run))
        batch: list[tuple[Record, bytes]] = []
        pos, end = 0, len(data)
        while pos < end:
            space = data.find(b" ", pos)
            nul = data.find(b"\0", space)
            if space < 0 or nul < 0 or nul + 21 > end:
                raise self._corrupt(commit, "its tree cannot be parsed")
            name = data[space + 1 : nul]
            oid = data[nul + 1 : nul + 21]
            pos = nul + 21
            # Entries sort by name: every record blob comes before obj-*.
            if not name[:1].isdigit():
                break
            digits = name[:LSN_DIGITS]
            if len(name) != RECORD_NAME_LEN or not name.endswith(b".json") or not (
                    digits.isdigit()):
                continue
            lsn = int(digits)
            try:
                kind, blob = odb.read(pygit2.Oid(raw=oid))
            except (KeyError, ValueError, pygit2.GitError):
                kind, blob = None, b""
            if kind != pygit2.enums.ObjectType.BLOB:
                raise CorruptLog(f"{self._where(commit, lsn)}: record blob is missing or "
                                 "not a blob", repair_hint(self.run))
            rec = decode(blob, self._where(commit, lsn))
            if rec.lsn != lsn or rec.run != self.run:
                raise CorruptLog(
                    f"{self._where(commit, lsn)}: record names LSN {rec.lsn} of run {rec.run!r}",
                    "a foreign record was placed in this log; it is not trusted",
                )
            batch.append((rec, blob))
        if not batch:
            raise self._corrupt(commit, "the append commit holds no record")
        return batch

    def _where(self, commit: pygit2.Commit | str, lsn: int) -> str:
        oid = commit if isinstance(commit, str) else str(commit.id)
        return f"{self.ref_name} LSN {lsn} (commit {oid[:12]})"

    def _corrupt(self, oid: str, why: str) -> CorruptLog:
        return CorruptLog(
            f"log {self.ref_name}: commit {oid[:12]}: {why}",
            UNTRUSTED,
        )
