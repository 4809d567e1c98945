"""Where a file that may come with a clone is read and written.

Invariant: a :class:`File` inside a working tree (``top`` set) is reached from
the tree's root one component at a time, each directory opened with
``O_NOFOLLOW`` relative to the one before, the last name opened with
``O_NOFOLLOW`` too, at the moment of the read or write: a symlink anywhere on
the way is refused (:class:`UnsafeFile`), so a committed ``.claude ->
../outside`` or ``.claude/settings.json -> ~/.aws/credentials`` is never read,
copied into the tree, or written through. Writes use durable_at.py's ``*_at``
functions, the same as every other write to the tree (worktree/tree.py).

A :class:`File` of the user's own (``top`` None: under the home directory, in
``$CODEX_HOME``, a path the user named) follows symlinks, as dotfile managers
expect; a write goes to the file the link names, the link stays, and
:meth:`File.write` returns that file so the caller can say where it wrote.

Either way only a regular file is read (never a device, FIFO or socket, which
could block or never end) and at most :data:`MAX_BYTES` of it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..base.durable import atomic_write, create_new, makedirs_durable, unlink_durable
from ..base.durable_at import create_new_at, mkdir_at, open_dir_at, unlink_at, write_at
from ..base.errors import WalError

MAX_BYTES = 1 << 20  # 1 MiB: far above any settings file, far below harm

_LINK_HINT = ("gitwal reads and writes a file in the working tree only as a regular file, "
              "never through a symbolic link (one that came with a clone may point outside "
              "the tree): replace the link with the file itself, then run the command again")
_KIND_HINT = "make it a regular file (or remove it), then run the command again"


class UnsafeFile(WalError):
    """A file gitwal will not read or write as it stands: reached through a
    symlink, not a regular file, larger than MAX_BYTES, or text it will not
    parse (parse.py). Exit 1."""


class _Missing(Exception):
    """A directory on the way does not exist (so neither does the file)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _bounded(fd: int, shown: Path) -> bytes:
    """Up to MAX_BYTES of the regular file open at ``fd`` (closed here)."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{shown} is {_kind(st.st_mode)}, not a regular file", _KIND_HINT)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 16, MAX_BYTES + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_BYTES:
                raise UnsafeFile(f"{shown} is larger than {MAX_BYTES >> 20} MiB",
                                 "gitwal reads settings files of at most 1 MiB; shorten it "
                                 "by hand, then run the command again")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class File:
    """A file gitwal reads as data: ``path``, inside the working tree ``top``
    (confined) or, with ``top`` None, one of the user's own."""

    path: Path
    top: Path | None = None

    @classmethod
    def in_tree(cls, top: Path, rel: str) -> File:
        return cls(top / rel, top)

    def sibling(self, name: str) -> File:
        return File(self.path.with_name(name), self.top)

    # -- the tree: one component at a time -----------------------------------

    def _parts(self) -> list[str]:
        assert self.top is not None
        parts = self.path.relative_to(self.top).parts
        # Names come from gitwal's own constants; refuse anything else anyway.
        if not parts or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
            raise UnsafeFile(f"refused path {self.path}: not inside the working tree",
                             _LINK_HINT)
        return list(parts)

    @contextmanager
    def _parent(self, create: bool) -> Iterator[tuple[int, str]]:
        """The open directory holding the file, and its name there."""
        assert self.top is not None
        parts = self._parts()
        fd = os.open(self.top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, name in enumerate(parts[:-1]):
                try:
                    nfd = open_dir_at(fd, name)
                except FileNotFoundError:
                    if not create:
                        raise _Missing from None
                    try:
                        nfd = mkdir_at(fd, name)
                    except FileExistsError:  # made meanwhile: open it, no follow
                        nfd = self._component(fd, parts, i)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    nfd = self._component(fd, parts, i)
                os.close(fd)
                fd = nfd
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _component(self, fd: int, parts: list[str], i: int) -> int:
        """Open ``parts[i]`` after a first attempt failed, or say why not."""
        assert self.top is not None
        shown = self.top.joinpath(*parts[: i + 1])
        try:
            st = os.stat(parts[i], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            raise _Missing from None
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeFile(f"{shown} is {_kind(st.st_mode)}: gitwal does not reach "
                             f"{self.path} through it", _LINK_HINT)
        try:
            return open_dir_at(fd, parts[i])
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped again
                raise UnsafeFile(f"{shown} changed while gitwal opened it", _LINK_HINT) from None
            raise

    def _lstat_at(self, fd: int, name: str) -> os.stat_result | None:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFile(f"{self.path} is a symbolic link (to "
                             f"{os.readlink(name, dir_fd=fd)})", _LINK_HINT)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{self.path} is {_kind(st.st_mode)}, not a regular file",
                             _KIND_HINT)
        return st

    # -- reading -------------------------------------------------------------

    def read(self) -> bytes | None:
        """The file's bytes (at most MAX_BYTES), or None when it does not exist."""
        if self.top is None:
            return self._read_own()
        try:
            with self._parent(create=False) as (fd, name):
                if self._lstat_at(fd, name) is None:
                    return None
                try:
                    f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    return None
                except OSError as e:
                    if e.errno == errno.ELOOP:  # swapped for a link since the lstat
                        raise UnsafeFile(f"{self.path} is a symbolic link", _LINK_HINT) from None
                    raise
                return _bounded(f, self.path)
        except _Missing:
            return None

    def _read_own(self) -> bytes | None:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):  # never opened: a device may act on open
            raise UnsafeFile(f"{self.path} is {_kind(st.st_mode)}, not a regular file",
                             _KIND_HINT)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        return _bounded(fd, self.path)

    def mode(self) -> int | None:
        """The file's permission bits, or None when it does not exist."""
        if self.top is None:
            try:
                return os.stat(self.path).st_mode & 0o7777
            except (FileNotFoundError, NotADirectoryError):
                return None
        try:
            with self._parent(create=False) as (fd, name):
                st = self._lstat_at(fd, name)
                return None if st is None else st.st_mode & 0o7777
        except _Missing:
            return None

    def exists(self) -> bool:
        return self.mode() is not None

    def real(self) -> Path:
        """Where a write lands: the path itself in the tree; for the user's own
        file, the file its symlinks name."""
        return self.path if self.top is not None else Path(os.path.realpath(self.path))

    # -- writing -------------------------------------------------------------

    def write(self, data: bytes, default_mode: int = 0o644, tag: str = "gitwal") -> Path:
        """Replace the file with ``data`` durably, keeping its mode (``default_mode``
        for a new one); the directories on the way are created. Returns the
        file written (:meth:`real`)."""
        mode = self.mode()
        mode = default_mode if mode is None else mode
        if self.top is None:
            real = self.real()
            if not real.parent.is_dir():
                makedirs_durable(real.parent)
            atomic_write(real, data, mode, tag=tag)
            return real
        with self._parent(create=True) as (fd, name):
            self._lstat_at(fd, name)  # a link or a directory made meanwhile: refused
            write_at(fd, name, data, mode, tag)
        return self.path

    def create_new(self, data: bytes, mode: int, tag: str = "gitwal") -> None:
        """Create the file with ``data``; FileExistsError when the name is taken."""
        if self.top is None:
            create_new(self.real(), data, mode, tag=tag)
            return
        with self._parent(create=True) as (fd, name):
            create_new_at(fd, name, data, mode, tag)

    def remove(self) -> None:
        """Remove the file (a regular file only); nothing when it is absent."""
        if self.top is None:
            if os.path.lexists(self.path):
                unlink_durable(self.path)  # a link itself: its target is left alone
            return
        try:
            with self._parent(create=False) as (fd, name):
                if self._lstat_at(fd, name) is not None:
                    unlink_at(fd, name)
        except _Missing:
            return


__all__ = ["MAX_BYTES", "File", "UnsafeFile"]
