"""The first law at the write layer: gitwal writes over a path only when the
path holds what gitwal itself wrote.

Every restore and redo (recovery, a failed check, a failed write, a failed
shell step) goes through here instead of writing the tree directly:

* :func:`put` writes a state only when the path now holds one of the states
  the caller proves gitwal wrote (a recorded pre- or post-image, a snapshot
  of the step's own effect); anything else is left in place and returned as
  :class:`Kept`, so the caller reports it (in doubt) instead of destroying it;
* :func:`save` stores what a path holds as a blob, for the one case a person
  forces an overwrite (``recover --restore``): the caller appends a record
  naming that blob *before* it overwrites, so the bytes are kept alive by the
  run's log (they survive ``git gc --prune=now``) and can be brought back
  with :func:`bring_back`.

The compare and the write are two system calls: a person who writes the path
in between (microseconds) is not detected. Nothing else writes the tree.
"""

from __future__ import annotations

import shlex
import stat
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import pygit2

from ..base.errors import PathRefused
from ..base.ids import ABSENT, UNKNOWN, BlobId, TreeId
from .restore import restore_paths
from .tree import MODE_GITLINK, MODE_TREE, Worktree, blob_id

# What a path holds when it is not a file gitwal can hash.
DIRECTORY = "directory"
SPECIAL = "special"  # a device, socket, FIFO, or a path gitwal may not read


@dataclass(frozen=True)
class Kept:
    """A path gitwal left as it found it: it held something gitwal did not write."""

    path: str
    found: str  # object id of what is there, ABSENT, DIRECTORY or SPECIAL
    why: str = ""  # when the path could not be written for another reason


@dataclass(frozen=True)
class Saved:
    """Bytes gitwal did not write, stored before a forced overwrite."""

    path: str
    blob: BlobId

    def command(self) -> str:
        return bring_back(self.path, self.blob)


def bring_back(path: str, blob: str) -> str:
    """The shell command that puts saved bytes back at ``path``."""
    return f"git cat-file blob {blob} > {shlex.quote(path)}"


def found(wt: Worktree, rel: str) -> str:
    """What ``rel`` holds now: its blob id, ABSENT, DIRECTORY or SPECIAL."""
    try:
        data, _mode = wt.read(rel)
    except PathRefused:
        return _not_a_file(wt, rel)
    except IsADirectoryError:
        return DIRECTORY
    return ABSENT if data is None else blob_id(data)


def _not_a_file(wt: Worktree, rel: str) -> str:
    """What stands at ``rel`` when it cannot be read as a file (through the
    worktree's confined walk, never followed): ABSENT when a parent is not a
    real directory (as for git, nothing under a symlink or a file is in the
    tree), else DIRECTORY or SPECIAL."""
    try:
        st = wt.lstat(rel)
    except PathRefused:  # a symlinked parent
        return ABSENT
    if st is None:
        return ABSENT
    return DIRECTORY if stat.S_ISDIR(st.st_mode) else SPECIAL


def torn_prefix(repo: pygit2.Repository, wt: Worktree, rel: str, post: str,
                pre: str = ABSENT) -> bool:
    """True when ``rel`` holds a proper prefix of the blob ``post`` that is not
    also a prefix of ``pre``: what only a writer that died half-way through
    writing ``post`` in place leaves. A prefix of both (an older version of a
    file that only grows, say after ``git reset --hard``) proves nothing: it
    may be a person's choice, so it does not count as gitwal's bytes."""
    if post in (ABSENT, UNKNOWN):
        return False
    try:
        data, _mode = wt.read(rel)
    except (PathRefused, OSError):
        return False
    if data is None:
        return False
    obj = repo.get(post)
    if not isinstance(obj, pygit2.Blob):
        return False
    whole = obj.data
    if not (len(data) < len(whole) and whole.startswith(data)):
        return False
    before = repo.get(pre) if pre != ABSENT else None
    return not (isinstance(before, pygit2.Blob) and before.data.startswith(data))


def put(wt: Worktree, rel: str, oid: str, mode: int, tag: str,
        ours: Collection[str]) -> Kept | None:
    """Set ``rel`` to ``oid`` if it now holds ``oid`` already or one of ``ours``.

    Returns None when the path holds ``oid`` afterwards, or what was found
    there when that was not gitwal's to overwrite (the path is untouched).
    """
    now = found(wt, rel)
    if now == oid:
        return None
    if now not in ours:
        return Kept(rel, now)
    wt.set_state(rel, oid, mode, tag)
    return None


def save(wt: Worktree, rel: str) -> Saved | None:
    """Store what ``rel`` holds as a blob (None: nothing to save: absent)."""
    data, _mode = wt.read(rel)
    if data is None:
        return None
    return Saved(rel, BlobId(str(wt.repo.create_blob(data))))


@dataclass(frozen=True)
class TreeRestore:
    """What putting a shell step's paths back to its pre tree did."""

    restored: tuple[str, ...]
    kept: tuple[Kept, ...]


def restore_plan(wt: Worktree, now: TreeId, paths: Iterable[str]
                 ) -> tuple[list[str], list[Kept]]:
    """Split ``paths`` into those that still hold their state in the snapshot
    ``now`` (safe to put back: the log keeps ``now``) and those changed since."""
    now_tree = wt.repo[now]
    assert isinstance(now_tree, pygit2.Tree)
    safe: list[str] = []
    kept: list[Kept] = []
    for rel in paths:
        want = _entry_state(now_tree, rel)
        have = found(wt, rel)
        if have == want:
            safe.append(rel)
        else:
            kept.append(Kept(rel, have))
    return safe, kept


def restore_tree(wt: Worktree, pre: TreeId, now: TreeId, paths: Iterable[str],
                 tag: str) -> TreeRestore:
    """Put ``paths`` back to their state in ``pre``, each only while it still
    holds its state in ``now``: the snapshot whose objects the caller's log
    keeps (so every byte overwritten can be brought back from that tree).
    A path that changed again since the snapshot is left as it is."""
    safe, kept = restore_plan(wt, now, paths)
    restored = restore_paths(wt, pre, safe, tag)
    kept += [Kept(p, SPECIAL, why) for p, why in restored.skipped]
    return TreeRestore(restored.done, tuple(kept))


def bring_back_tree(tree: str, paths: Iterable[str]) -> str:
    """The command that puts ``paths`` back as a snapshot ``tree`` holds them."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return f"git restore --source={tree} --worktree -- {quoted}"


def _entry_state(tree: pygit2.Tree, rel: str) -> str:
    try:
        entry = tree[rel]
    except KeyError:
        return ABSENT
    if entry.filemode in (MODE_TREE, MODE_GITLINK):
        return DIRECTORY
    return str(entry.id)


def describe(kept: Iterable[Kept]) -> str:
    """``a.txt (changed by someone else), b (now a directory)`` for reports."""
    out = []
    for k in kept:
        if k.why:
            what = k.why
        elif k.found == ABSENT:
            what = "deleted since"
        elif k.found == DIRECTORY:
            what = "now a directory"
        elif k.found == SPECIAL:
            what = "not a regular file"
        else:
            what = f"holds {k.found[:12]}, which gitwal did not write"
        out.append(f"{k.path} ({what})")
    return ", ".join(out)


def left_note(kept: tuple[Kept, ...]) -> str:
    """``; left in place: a.txt (...)`` when a restore skipped paths."""
    return f"; left in place (gitwal did not write them): {describe(kept)}" if kept else ""
