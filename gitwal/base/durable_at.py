"""Durable writes in the working tree, by directory descriptor and single name
(the by-path family, for gitwal's own files, is durable.py).

The working tree's directories a hostile repository or a running command may
swap for symlinks at any moment (gitwal/worktree/tree.py opens the descriptor
one component at a time). These functions never follow a symlink at the name,
and their temp files have unpredictable names created with ``O_EXCL``, so a
planted file or link cannot redirect a write. Invariant (as durable.py's):
when :func:`write_at` returns, the file holds the new bytes on stable storage
and its directory entry is durable; a crash before that leaves the old file
or the new one, never a mix (but at the ``mid-write`` crash point).
"""

from __future__ import annotations

import os
from typing import NoReturn

from .crashpoints import crash_due, die
from .durable import temp_name, write_fd

# Opens a directory without following a symlink at the name (ELOOP/ENOTDIR).
O_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir_at(dir_fd: int, name: str) -> int:
    """Open the directory ``name`` in ``dir_fd``; a symlink there is not followed
    (OSError ELOOP or ENOTDIR)."""
    return os.open(name, O_DIR_NOFOLLOW, dir_fd=dir_fd)


def mkdir_at(dir_fd: int, name: str) -> int:
    """Create the directory ``name`` in ``dir_fd`` durably; returns it opened."""
    os.mkdir(name, 0o777, dir_fd=dir_fd)
    os.fsync(dir_fd)
    return open_dir_at(dir_fd, name)


def write_at(dir_fd: int, name: str, data: bytes, mode: int = 0o644, tag: str = "w") -> None:
    """Replace the entry ``name`` of ``dir_fd`` with a file holding ``data``.

    A fresh ``O_EXCL|O_NOFOLLOW`` temp file in the same directory, fsync,
    ``renameat`` over ``name`` (which replaces a symlink there, never writes
    through it; a directory there makes it fail), fsync of the directory. On
    any error the temp file is removed: nothing is left behind but by a crash.
    """
    if crash_due("mid-write"):
        _torn_write_at(dir_fd, name, data)
    tmp = temp_name(name, tag)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dir_fd)
    try:
        try:
            write_fd(fd, data, mode)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def symlink_at(target: bytes, dir_fd: int, name: str) -> None:
    """Create the symlink ``name -> target`` in ``dir_fd`` durably (the name must
    be free)."""
    os.symlink(target, name, dir_fd=dir_fd)
    os.fsync(dir_fd)


def unlink_at(dir_fd: int, name: str) -> None:
    """Remove the non-directory ``name`` of ``dir_fd`` (a symlink itself, never
    its target) durably."""
    os.unlink(name, dir_fd=dir_fd)
    os.fsync(dir_fd)


def rmdir_at(dir_fd: int, name: str) -> None:
    """Remove the empty directory ``name`` of ``dir_fd`` durably."""
    os.rmdir(name, dir_fd=dir_fd)
    os.fsync(dir_fd)


def _torn_write_at(dir_fd: int, name: str, data: bytes) -> NoReturn:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        os.write(fd, data[: max(1, len(data) // 2)])
        os.fsync(fd)
    finally:
        os.close(fd)
    die()


def create_new_at(dir_fd: int, name: str, data: bytes, mode: int = 0o600,
                  tag: str = "n") -> None:
    """:func:`~gitwal.base.durable.create_new` for the working tree: the name ``name`` of ``dir_fd``
    is created durably, or FileExistsError when it is taken (a symlink too),
    never replaced or written through (an ``O_EXCL|O_NOFOLLOW`` temp file,
    fsynced, then linkat(2), then fsync of the directory)."""
    tmp = temp_name(name, tag)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dir_fd)
    try:
        try:
            write_fd(fd, data, mode)
        finally:
            os.close(fd)
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    finally:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
    os.fsync(dir_fd)
