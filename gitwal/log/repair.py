"""`git wal repair`: cut a damaged log back to its newest intact append.

A log is damaged when objects its ref reaches are missing (a prune that raced
an append, a lost disk block) or a record in it cannot be trusted. Readers
then stop with :class:`CorruptLog`; repair is the way out, and it is itself
on the record:

1. find the newest append whose commit, tree, records and named objects are
   all present and whose chain back to the root is intact and dense;
2. write a *repair commit* (parent: that append) holding ``repair.json`` (what
   was cut, from which head, and why) and every record blob and blob object of
   the cut appends that survived, and keep it under
   ``refs/wal-archive/<run>/repair-<n>`` (docs/format.md, docs/recovery.md);
3. compare-and-swap the live ref from the damaged head to that append.

The damaged head itself is not kept under a ref: git (gc, fsck, push) fails
on a ref that reaches a missing object, so keeping it would break the whole
repository; its id is in ``repair.json``. New appends then reuse the cut LSNs;
the ``repair-<n>`` name keeps the archive out of the run's history segments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pygit2

from ..base.errors import CorruptLog, WalError
from ..base.ids import CommitId, Lsn, RunId
from .rewrite import ARCHIVE_PREFIX
from .store import Store

REPAIR_FILE = "repair.json"
_SIGNATURE = ("gitwal", "gitwal@localhost")


class NotDamaged(WalError):
    """Repair was asked for a log that reads whole."""


class Unrepairable(WalError):
    """No intact prefix of the log can be found."""


@dataclass(frozen=True)
class RepairResult:
    run: RunId
    damaged_head: CommitId
    head: CommitId  # the live ref now
    kept: Lsn  # the last LSN kept
    lost: tuple[Lsn, ...]  # LSNs cut (as far as the damaged head's message says)
    reason: str  # what was found damaged
    archive: str  # refs/wal-archive/<run>/repair-<n>
    salvaged: int  # record blobs and objects of the cut appends kept in the archive

    def to_dict(self) -> dict[str, object]:
        return {"run": self.run, "damaged_head": self.damaged_head, "head": self.head,
                "kept": self.kept, "lost": list(self.lost), "reason": self.reason,
                "archive": self.archive, "salvaged": self.salvaged}


def damage(store: Store) -> str | None:
    """Why the live log cannot be trusted whole, or None if it reads whole."""
    head = store.head()
    if head is None:
        return None
    commits, whole = store.parents_present(head)
    if not whole:
        missing = commits[-1][:12] + "'s parent" if commits else head[:12]
        return f"log {store.ref_name}: commit {missing} is missing from the repository"
    for oid in reversed(commits):
        problem = store.append_problem(oid)
        if problem is not None:
            return problem
    try:
        store.records()
    except CorruptLog as e:
        return e.message
    return None


def repair(store: Store) -> RepairResult:
    """Cut the damaged live log of ``store`` back to its newest intact append."""
    with store.locked(wait=False):
        head = store.head()
        if head is None:
            raise NotDamaged(f"run {store.run} has no live log",
                             "list runs with `git wal runs`")
        reason = damage(store)
        if reason is None:
            raise NotDamaged(f"run {store.run} is not damaged: its log reads whole",
                             f"`git wal verify --run {store.run}` checks it in full")
        good = _newest_intact(store, head)
        kept = store.head_records(good)[-1].lsn
        last = _last_lsn(store, head)
        lost = tuple(Lsn(n) for n in range(kept + 1, max(kept, last) + 1))
        evidence, salvaged = _evidence(store, head, good, kept, lost, reason)
        archive = _archive_name(store)
        store.create_ref(archive, evidence)
        store.move_head(head, good)
        return RepairResult(store.run, head, good, Lsn(kept), lost, reason, archive,
                            salvaged)


def _newest_intact(store: Store, head: CommitId) -> CommitId:
    commits, whole = store.parents_present(head)
    if not whole:
        raise Unrepairable(
            f"run {store.run}: a commit of the log is missing, so its older appends "
            "cannot be reached", f"`git wal drop {store.run}` is not possible either; "
            f"restore the objects (e.g. `git fetch` from a remote holding refs/wal/"
            f"{store.run}) and run the repair again")
    oldest_first = list(reversed(commits))
    bad = next((i for i, oid in enumerate(oldest_first)
                if store.append_problem(oid) is not None), len(oldest_first))
    for oid in reversed(oldest_first[:bad]):
        try:
            # A fresh reader: the whole chain from here must read (dense LSNs, a plan).
            Store(store.repo, store.run).validated(oid)
        except CorruptLog:
            continue
        if oid == head:
            break
        return oid
    raise Unrepairable(f"run {store.run}: no append of the log is intact",
                       f"`git wal log --run {store.run}` shows what reads; start a new run")


def _last_lsn(store: Store, head: CommitId) -> int:
    """The LSN of the damaged head's last record, from its commit message."""
    obj = store.repo.get(head)
    if isinstance(obj, pygit2.Commit):
        word = obj.message.split(" ", 2)[1:2]
        if word and word[0].isdigit():
            return int(word[0])
    return 0


def _evidence(store: Store, head: CommitId, good: CommitId, kept: int,
              lost: tuple[Lsn, ...], reason: str) -> tuple[CommitId, int]:
    """The repair commit: repair.json plus what survived of the cut appends."""
    repo = store.repo
    odb = repo.odb
    tb = repo.TreeBuilder()
    salvaged = 0
    commits, _ = store.parents_present(head)
    for oid in commits:
        if oid == good:
            break
        commit = repo.get(oid)
        try:
            tree = commit.tree if isinstance(commit, pygit2.Commit) else None
        except (KeyError, pygit2.GitError):
            tree = None
        if tree is None:
            continue
        for entry in tree:
            name = entry.name or ""
            # Blobs only: a tree may itself reach a missing object, and a ref
            # that does breaks git gc for the whole repository.
            if entry.filemode != pygit2.GIT_FILEMODE_BLOB or entry.id not in odb:
                continue
            if name.endswith(".json") and name[:1].isdigit():
                tb.insert(f"cut-{name}", entry.id, pygit2.GIT_FILEMODE_BLOB)
            else:
                tb.insert(name, entry.id, pygit2.GIT_FILEMODE_BLOB)
            salvaged += 1
    report = {"v": 1, "type": "repair", "run": store.run, "damaged_head": head,
              "kept": kept, "lost": list(lost), "reason": reason}
    blob = repo.create_blob(json.dumps(report, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False).encode())
    tb.insert(REPAIR_FILE, blob, pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature(*_SIGNATURE)
    cut = f"{lost[0]}..{lost[-1]}" if len(lost) > 1 else (str(lost[0]) if lost else "nothing")
    message = f"wal repair: cut LSN {cut} (damaged head {head[:12]})\n\n{reason}\n"
    made = repo.create_commit(None, sig, sig, message, tb.write(), [pygit2.Oid(hex=good)])
    return CommitId(str(made)), salvaged


def _archive_name(store: Store) -> str:
    prefix = f"{ARCHIVE_PREFIX}{store.run}/repair-"
    taken = [int(n[len(prefix):]) for n in store.repo.references
             if n.startswith(prefix) and n[len(prefix):].isdigit()]
    return f"{prefix}{max(taken, default=0) + 1}"
