"""fsync by name: the barrier for bytes gitwal did not write itself (a shell
command's files, an agent's Edit, a person's edit a snapshot takes in, git's
loose objects' directory entries).

A record that says such bytes are in place is appended only after this made
them durable (docs/crash-safety.md, "The barrier behind each record"). It only
opens and fsyncs, never writes; syncfs is no substitute (a no-op on FUSE).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from ..base.durable_at import open_dir_at


@dataclass(frozen=True)
class Synced:
    """What :func:`fsync_names` made durable: paths fsynced as themselves
    (files, and directories named as paths), and directories fsynced as the
    parents of those paths."""

    files: int
    dirs: int


def fsync_names(root: str | os.PathLike[str], paths: Iterable[str]) -> Synced:
    """fsync, by name, each of ``paths`` (relative to ``root``) and every
    directory whose entries they may have changed.

    The barrier for writes gitwal did not make itself (a shell command's
    files, a person's edits a snapshot takes in): each path that exists is
    opened and fsynced (a regular file, or a directory named as a path: its
    entries; a symlink, FIFO or device is an entry only), then each directory
    from the path's parent up
    to ``root`` is fsynced, which makes creations, renames and unlinks durable,
    including those of directories the change created. A path that is gone
    leaves its nearest existing ancestor to hold the unlink. Directories are
    opened one component at a time without following a symlink, so a path
    never leads outside ``root``; what cannot be opened that way is not
    gitwal's to make durable (it is not in the tree as a file).
    """
    names: dict[str, set[str]] = {"": set()}
    for rel in paths:
        parts = [p for p in rel.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            continue
        for i in range(len(parts)):
            names.setdefault("/".join(parts[:i]), set()).add(parts[i])
    # One after another, deepest first: threads gained about 15 % on a disk
    # that serialises the flushes, and would hide the order from the
    # crash-state checker's trace (a thread's descriptors are its process's).
    files = dirs = 0
    for d in sorted(names, key=lambda d: (-d.count("/"), d)):
        fd = _open_tree_dir(root, d)
        if fd is None:
            continue  # gone, or no longer a directory: an ancestor holds the change
        try:
            for name in sorted(names[d]):
                child = f"{d}/{name}" if d else name
                if child in names or child == ".git":
                    continue  # a directory on the way: fsynced in its own turn
                files += _fsync_entry(fd, name)
            os.fsync(fd)
            dirs += 1
        finally:
            os.close(fd)
    return Synced(files, dirs)


def _open_tree_dir(root: str | os.PathLike[str], rel: str) -> int | None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in [p for p in rel.split("/") if p]:
        try:
            nfd = open_dir_at(fd, part)
        except OSError:  # missing, a file, or a symlink: never followed
            os.close(fd)
            return None
        os.close(fd)
        fd = nfd
    return fd


def _fsync_entry(dir_fd: int, name: str) -> int:
    """fsync ``name`` in ``dir_fd`` if it is a regular file or a directory; 1 if it was."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:  # gone, a symlink (ELOOP), unreadable: the directory fsync holds its entry
        return 0
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return 0
        os.fsync(fd)
        return 1
    finally:
        os.close(fd)
