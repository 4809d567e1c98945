"""Path confinement in the working tree: a tree-relative path is checked,
then reached one component at a time, never through a symbolic link.

Invariant: every path gitwal reads, writes or removes in the working tree is
reached from the tree's root one component at a time, each directory opened
with ``O_NOFOLLOW`` relative to the one before (:meth:`ConfinedPaths.parent_dir`), at
the moment of the operation: a component that is a symlink (or is swapped for
one after an earlier check) is refused with :class:`PathRefused`, so nothing
read from a log or planted in a repository makes gitwal read or write outside
the tree. The final component is never followed either. ``..``, ``.`` and
``.git`` components are refused before any file system call.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..base.durable_at import mkdir_at, open_dir_at
from ..base.errors import PathRefused

PATH_HINT = "give a path relative to the top of the working tree, inside it"
LINK_HINT = ("gitwal never reads or writes through a symbolic link; replace the link "
             "with a real directory (or edit the files it points to yourself), then "
             "run the command again")


class NoParent(Exception):
    """A directory on the way to the path is missing (or is a plain file)."""


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _parts(rel: str) -> list[str]:
    """The components of a tree-relative path; refuses any that could leave the
    tree or enter a git directory (the walk below never sees them)."""
    parts = rel.split("/")
    for p in parts:
        if p in ("", ".", "..") or "\0" in p:
            raise PathRefused(f"refused path {rel!r}: not a normalised path inside the tree",
                              PATH_HINT)
        if p.lower() == ".git":
            raise PathRefused(f"refused path {rel!r}: gitwal never writes inside .git",
                              PATH_HINT)
    return parts


class ConfinedPaths:
    """Mixed into :class:`gitwal.worktree.tree.Worktree`, which provides ``root``."""

    root: Path

    def confine(self, path: str) -> str:
        """Return ``path`` as a normalised tree-relative POSIX path, or refuse it.

        A check for early, clear refusals before anything is logged; the
        operations themselves do not rely on it (see the module invariant)."""
        rel = self.confine_any(path)
        try:
            with self.parent_dir(rel) as (fd, name):
                st = lstat_at(fd, name)
        except NoParent:
            return rel  # the write creates the missing directories
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise PathRefused(f"refused path {path!r}: it is a symbolic link",
                              "edit the file the link points to instead")
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise PathRefused(f"refused path {path!r}: it is a directory", PATH_HINT)
        return rel

    def confine_any(self, path: str) -> str:
        """``path`` as a normalised tree-relative POSIX path naming a file or a
        directory (lexical checks only: for pathspecs gitwal hands to git)."""
        hint = PATH_HINT
        if not path or "\0" in path:
            raise PathRefused(f"refused path {path!r}: empty or contains NUL", hint)
        if os.path.isabs(path) or path.startswith("\\"):
            raise PathRefused(f"refused path {path!r}: absolute paths are not accepted", hint)
        parts = path.replace("\\", "/").split("/")
        if ".." in parts:
            raise PathRefused(f"refused path {path!r}: '..' may leave the working tree", hint)
        rel = posixpath.normpath("/".join(parts))
        if rel in (".", ""):
            raise PathRefused(f"refused path {path!r}: it names the tree itself", hint)
        if any(p.lower() == ".git" for p in rel.split("/")):
            raise PathRefused(
                f"refused path {path!r}: gitwal never writes inside .git", hint
            )
        return rel

    @contextmanager
    def parent_dir(self, rel: str, create: bool = False, lenient: bool = False
                ) -> Iterator[tuple[int, str]]:
        """The open directory holding ``rel``'s last component, and that name.

        Walks from the root with ``O_NOFOLLOW`` one component at a time. A
        missing directory is created (durably) when ``create``, else
        :class:`NoParent`; a component that is a plain file is refused, or
        :class:`NoParent` when ``lenient`` (a read: the path does not exist);
        a symlink is always refused."""
        parts = _parts(rel)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, name in enumerate(parts[:-1]):
                try:
                    nfd = open_dir_at(fd, name)
                except FileNotFoundError:
                    if not create:
                        raise NoParent(rel) from None
                    try:
                        nfd = mkdir_at(fd, name)
                    except FileExistsError:  # made meanwhile: open it, no follow
                        nfd = self._open_component(fd, rel, parts, i, lenient)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    nfd = self._open_component(fd, rel, parts, i, lenient)
                os.close(fd)
                fd = nfd
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _open_component(self, fd: int, rel: str, parts: list[str], i: int,
                        lenient: bool) -> int:
        """Open ``parts[i]`` after a first attempt failed: refuse a symlink or a
        file with a clear message (or give up quietly on a file when lenient)."""
        name, shown = parts[i], "/".join(parts[: i + 1])
        st = lstat_at(fd, name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise PathRefused(f"refused path {rel!r}: {shown} is a symbolic link", LINK_HINT)
        if st is None or not stat.S_ISDIR(st.st_mode):
            if lenient:
                raise NoParent(rel)
            raise PathRefused(f"refused path {rel!r}: {shown} is not a directory", PATH_HINT)
        try:
            return open_dir_at(fd, name)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped again: refuse
                raise PathRefused(f"refused path {rel!r}: {shown} changed while gitwal "
                                  "opened it", LINK_HINT) from None
            raise
