"""Keeping an append's objects alive through a concurrent ``git gc``
(docs/format.md, "Packs").

Invariants kept here:

* an append's objects are born in a kept pack (packwrite.py), with copies of
  the loose objects its records name: a loose object is unreachable until the
  append names it, so a prune may delete it at any moment, but not once it
  sits in a kept pack;
* an object named but packed elsewhere is checked after the ref moved
  (:func:`pruned`); store.py undoes the append if a prune took it;
* gitwal's small kept packs are merged now and then, by one process at a time.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..base.errors import WalError
from .locks import lock_dir
from .packmerge import MERGE_AT, merge, merge_tier
from .packwrite import BLOB, TREE, RawObject


@dataclass(frozen=True)
class Ref:
    """An object a record names, to be kept reachable from the append commit."""

    oid: str
    is_tree: bool = False


class AppendLost(WalError):
    """A concurrent ``git gc --prune=now`` removed objects of an append; it was undone."""


def gather_loose(repo: pygit2.Repository, common: Path, run: str, oid: str, is_tree: bool,
                 into: list[RawObject], reachable: pygit2.Tree | None = None) -> bool:
    """Add the object ``oid`` (and, for a tree, the loose objects under it)
    to ``into`` when it is loose; False when it is packed (not gathered).

    A loose object is unreachable until the append names it, so a prune
    may delete it at any moment; once copied into the append's kept pack
    it cannot be lost. A packed tree is taken whole as packed (git packs
    a tree with what it names). ``reachable``: a tree the repository's refs
    reach (HEAD's, whose commit the reflog keeps too): a subtree or file of
    ``oid`` that is the very object at the same path there cannot be pruned
    before the append names it, so it is not copied (a snapshot of a large
    tree copies only what differs from HEAD, not every loose object of it).
    """
    path = common / "objects" / oid[:2] / oid[2:]
    if not path.exists():
        if pygit2.Oid(hex=oid) not in repo.odb:
            raise AppendLost(
                f"object {oid[:12]} for the next append to run {run} is missing "
                "(removed by a concurrent `git gc --prune=now` before the append); "
                "nothing was appended", "run the command again")
        return False
    try:
        kind, data = repo.odb.read(pygit2.Oid(hex=oid))
    except (KeyError, pygit2.GitError):
        raise AppendLost(
            f"object {oid[:12]} for the next append to run {run} was removed by a "
            "concurrent `git gc --prune=now` while it was read; nothing was appended",
            "run the command again") from None
    into.append(RawObject(TREE if kind == pygit2.GIT_OBJECT_TREE else BLOB, data))
    if is_tree:
        tree = repo[oid]
        assert isinstance(tree, pygit2.Tree)
        for entry in tree:
            if entry.filemode == pygit2.GIT_FILEMODE_COMMIT:
                continue  # a submodule's commit lives in its own repository
            there = _entry(reachable, entry.name)
            if there is not None and there.id == entry.id:
                continue  # reachable from HEAD as it is
            gather_loose(repo, common, run, str(entry.id),
                         entry.filemode == pygit2.GIT_FILEMODE_TREE, into,
                         there if isinstance(there, pygit2.Tree) else None)
    return True


def _entry(tree: pygit2.Tree | None, name: str | None) -> pygit2.Object | None:
    if tree is None or name is None:
        return None
    try:
        return tree[name]
    except KeyError:
        return None


def head_tree(repo: pygit2.Repository) -> pygit2.Tree | None:
    """HEAD's tree, or None (unborn, or not a commit)."""
    try:
        commit = repo.head.peel(pygit2.Commit)
    except (pygit2.GitError, KeyError, ValueError):
        return None
    return commit.tree


def pruned(common: Path, oids: Sequence[str]) -> list[str]:
    """Which of ``oids`` are gone. A fresh object database answers, not this
    process's cached list of packs (gc may have deleted a pack we still have
    mapped)."""
    odb = pygit2.Odb(str(common / "objects"))
    return [o for o in oids if pygit2.Oid(hex=o) not in odb]


def merge_packs(repo: pygit2.Repository, common: Path) -> None:
    """Merge gitwal's small kept packs now and then (packwrite.merge), by
    one process at a time; a busy merger is simply not waited for."""
    objects = common / "objects"
    # Cheap on every append: a directory listing, then one stat per kept pack
    # only once MERGE_AT exist; the lock only when a tier is full.
    packs = objects / "pack"
    keeps = [name for name in os.listdir(packs) if name.endswith(".keep")]
    if len(keeps) < MERGE_AT:
        return
    sizes = []
    for name in keeps:
        try:
            sizes.append((packs / name).with_suffix(".pack").stat().st_size)
        except OSError:
            continue  # merged away meanwhile
    if merge_tier(sizes) is None:
        return
    fd = os.open(lock_dir(repo) / "packs.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        merged = merge(objects)
    finally:
        os.close(fd)
    if merged is not None:
        # libgit2 keeps every pack it read open (and its index mapped), also
        # once deleted: a long-lived process (the hook server, a harness)
        # would hold one more per append. Dropping the repository's database
        # handles (reopened on the next read) lets the merged-away packs go.
        repo.free()
