"""Every durable write of gitwal goes through here or durable_at.py (crash
points: crashpoints.py).

Invariant: when :func:`atomic_write` or :func:`~gitwal.base.durable_at.write_at`
returns, the file holds the new bytes on stable storage and its directory
entry is durable; a crash at any instant before that leaves either the old
file or the new one, never a mix (except at the ``mid-write`` crash point,
which simulates a non-atomic writer on purpose).

Two families: this module takes a path and serves gitwal's own files (under
``.git``, in the user's config); durable_at.py takes a directory descriptor
and a single name and serves the working tree, whose directories may be
swapped for symlinks at any moment. Both name their temp files with
:func:`temp_name` and write them with :func:`write_fd`.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import NoReturn

from .crashpoints import crash_due, die


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (creations, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: str | os.PathLike[str]) -> None:
    """Ask ``path``'s file system to write back everything (syncfs(2)).

    An extra only, never the barrier a record relies on: Linux returns 0 from
    syncfs on a FUSE mount without asking the file system to flush (fuse-
    overlayfs, sshfs, sandboxes' mounts), so nothing may reach stable storage.
    The barrier is :func:`gitwal.worktree.byname.fsync_names`: each changed path
    fsynced by name.
    """
    import ctypes  # only shell-step snapshots need it

    fd = os.open(path, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def makedirs_durable(path: Path, mode: int | None = None) -> None:
    """Create ``path`` and parents, fsyncing each new directory's parent.

    ``mode``: the directories this call creates get exactly this mode (the
    umask cannot take bits away); existing ones are left alone. None: git's
    way, 0o777 less the umask."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            if mode is None:
                d.mkdir()
            else:
                d.mkdir(mode)
        except FileExistsError:
            continue
        if mode is not None:
            os.chmod(d, mode)
        fsync_dir(d.parent)


TEMP_SUFFIX = ".walt"


def temp_prefix(name: str, tag: str) -> str:
    """Every temp file of a write of ``name`` tagged ``tag`` starts with this;
    recovery finds them by it (:func:`temp_name` adds a random part)."""
    return f".{name}.{tag}."


def temp_name(name: str, tag: str) -> str:
    """A fresh temp file name next to ``name``: ``.NAME.<tag>.<random hex>.walt``.

    Unpredictable, so a file or symlink committed at a guessed name is never
    the one gitwal opens (and it is created with ``O_EXCL`` anyway)."""
    return temp_prefix(name, tag) + secrets.token_hex(8) + TEMP_SUFFIX


def write_fd(fd: int, data: bytes, mode: int) -> None:
    """Write all of ``data`` to the new file ``fd``, give it ``mode``, fsync it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fchmod(fd, mode & 0o7777)
    os.fsync(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o644, tag: str = "w") -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync directory.

    For gitwal's own files; working-tree paths go through
    :func:`~gitwal.base.durable_at.write_at`."""
    if crash_due("mid-write"):
        _torn_write(path, data)
    place(path, data, mode, tag)
    fsync_dir(path.parent)


def place(path: Path, data: bytes, mode: int = 0o644, tag: str = "w") -> None:
    """:func:`atomic_write` without the fsync of the directory, for a writer
    that places several files in one directory and then syncs it once (the
    packs of appends, packwrite.py): the file's bytes are durable, its name
    only after the caller's :func:`fsync_dir`."""
    tmp = path.with_name(temp_name(path.name, tag))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        try:
            write_fd(fd, data, mode)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_cache(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` by a rename, without fsync: for a cache
    gitwal rebuilds from the log when it is missing or torn (a crash may
    leave either), never for anything the log does not also hold."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(temp_name(path.name, "c"))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a cache that cannot be written is rebuilt next time


def unlink_durable(path: Path) -> None:
    """Remove a file and make the removal durable."""
    os.unlink(path)
    fsync_dir(path.parent)


def _torn_write(path: Path, data: bytes) -> NoReturn:
    """What a non-atomic writer leaves when it dies half-way: then die."""
    with open(path, "wb") as f:
        f.write(data[: max(1, len(data) // 2)])
        f.flush()
        os.fsync(f.fileno())
    die()


def create_once(path: Path, data: bytes, mode: int = 0o600) -> bool:
    """Create ``path`` durably with ``data`` unless it exists; True if this call made it.

    The content is complete and synced before the name appears (hard link of
    a synced temp file), so a reader never sees a partial file, and of two
    racing creators exactly one wins."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.walt")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_fd(fd, data, mode)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)
    return True


def create_new(path: Path, data: bytes, mode: int = 0o600, tag: str = "n") -> None:
    """Create ``path`` durably with ``data`` and exactly ``mode``; FileExistsError
    when the name is taken (a dangling symlink too): nothing there is replaced
    or written through.

    An unpredictable ``O_EXCL|O_NOFOLLOW`` temp file (mode 0600 from its
    creation) is written and fsynced, then link(2) gives it the name, which
    never replaces one, then the directory is fsynced: a crash leaves no file
    or a whole one. On a file system without hard links the name itself is
    created with ``O_EXCL|O_NOFOLLOW`` and written in place (a crash there can
    leave it short)."""
    tmp = path.with_name(temp_name(path.name, tag))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        try:
            write_fd(fd, data, mode)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links here: create the name itself, exclusively
            fd = os.open(path,
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
            try:
                write_fd(fd, data, mode)
            finally:
                os.close(fd)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
