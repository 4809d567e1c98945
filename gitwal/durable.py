"""Every durable write of gitwal goes through here, and so does every crash point.

Invariant: when :func:`atomic_write` returns, the file holds the new bytes on
stable storage and its directory entry is durable; a crash at any instant
before that leaves either the old file or the new one, never a mix (except at
the ``mid-write`` crash point, which simulates a non-atomic writer on purpose).

Crash points: ``GITWAL_CRASH_AT=<name>`` or ``<name>:<n>`` makes the process
SIGKILL itself the n-th time (default: first) it reaches the named point. The
list of names lives in :data:`CRASH_POINTS` and docs/crash-safety.md.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import NoReturn

CRASH_POINTS = (
    "mid-append",  # record objects written, ref not yet moved
    "after-append",  # ref moved, its directory not yet fsynced
    "after-intent",  # intent durable, target untouched
    "mid-write",  # target half-written in place (a torn file)
    "between-paths",  # multi-path step: first path done, next not yet
    "after-apply",  # target written, not yet verified
    "after-verify",  # verified, commit record not yet appended
    "after-snapshot",  # exec: pre-tree snapshot taken, intent not yet appended
    "after-exec",  # exec: command finished, post snapshot not yet taken
    "mid-restore",  # a restore wrote the first path back, not the rest
    "checkpoint-after-commit",  # checkpoint commit made, its record not yet appended
    "compact-after-rewrite",  # compaction: new chain written, nothing archived or moved
    "compact-after-archive",  # compaction: old head archived, live ref not yet moved
)

_ENV = "GITWAL_CRASH_AT"
_spec = os.environ.get(_ENV, "")
_name, _, _nth = _spec.partition(":")
_target = int(_nth) if _nth.isdigit() else 1
_seen = 0


def crash_due(name: str) -> bool:
    """Count one arrival at the point; True on the arrival that must crash."""
    global _seen
    if name != _name:  # the common case: one string compare, nothing else
        return False
    _seen += 1
    return _seen == _target


def die() -> NoReturn:
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached: SIGKILL cannot be caught


def crash_point(name: str) -> None:
    """SIGKILL this process if ``GITWAL_CRASH_AT`` names this point (and count)."""
    if crash_due(name):
        die()


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (creations, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: str | os.PathLike[str]) -> None:
    """Make everything written on ``path``'s file system durable (syncfs(2)).

    One barrier for writes gitwal does not make itself (git's objects and
    index during a snapshot, a shell command's files); falls back to sync().
    """
    import ctypes  # only shell-step snapshots need it

    fd = os.open(path, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def makedirs_durable(path: Path) -> None:
    """Create ``path`` and parents, fsyncing each new directory's parent."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        fsync_dir(d.parent)


def temp_name(path: Path, tag: str) -> Path:
    """The temp file an atomic write of ``path`` uses; recovery can find it by tag."""
    return path.with_name(f".{path.name}.{tag}.walt")


def atomic_write(path: Path, data: bytes, mode: int = 0o644, tag: str = "w") -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync directory."""
    if crash_due("mid-write"):
        _torn_write(path, data)
    tmp = temp_name(path, tag)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode & 0o7777)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


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
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode & 0o7777)
        os.fsync(fd)
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
