"""The working tree: path confinement, content ids, atomic writes.

Invariant: every path gitwal reads, writes or removes in the working tree is
reached from the tree's root one component at a time, each directory opened
with ``O_NOFOLLOW`` relative to the one before (:meth:`Worktree.parent_dir`), at
the moment of the operation: a component that is a symlink (or is swapped for
one after an earlier check) is refused with :class:`PathRefused`, so nothing
read from a log or planted in a repository makes gitwal read or write outside
the tree. The final component is never followed either. ``..``, ``.`` and
``.git`` components are refused before any file system call. The user's index
is never read or written: snapshots (snapshot.py) use a scratch index inside
the git directory.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2

from ..base.durable import TEMP_SUFFIX, temp_prefix
from ..base.durable_at import mkdir_at, open_dir_at, symlink_at, unlink_at, write_at
from ..base.errors import PathRefused, WalError
from ..base.ids import ABSENT, BlobId
from .snapshot import Snapshots

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_GITLINK = 0o160000

_HINT = "give a path relative to the top of the working tree, inside it"
_LINK_HINT = ("gitwal never reads or writes through a symbolic link; replace the link "
              "with a real directory (or edit the files it points to yourself), then "
              "run the command again")


def blob_id(data: bytes) -> BlobId:
    """The git object id of ``data`` as a blob (no write)."""
    return BlobId(str(pygit2.hash(data)))


def _git_dirs(repo: pygit2.Repository) -> list[Path]:
    """The git directory and, for a linked worktree, the common one."""
    gitdir = Path(repo.path).resolve()
    out = [gitdir]
    try:
        common = (gitdir / "commondir").read_text().strip()
    except OSError:
        return out
    out.append((gitdir / common).resolve())
    return out


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
                              _HINT)
        if p.lower() == ".git":
            raise PathRefused(f"refused path {rel!r}: gitwal never writes inside .git", _HINT)
    return parts


class Worktree(Snapshots):
    """The working tree through confined paths (snapshots: snapshot.py)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        if repo.workdir is None:
            raise WalError("this repository has no working tree (it is bare)",
                           "run gitwal inside a clone with a working tree")
        self.repo = repo
        self.root = Path(repo.workdir).resolve()
        # Bytes of withheld images (secret-looking files) this process read or
        # computed: the log names them by id only, so only here can a step
        # write them (its post, or its pre when it aborts).
        self.held: dict[str, bytes] = {}
        self.committed_forms = {}
        for gitdir in _git_dirs(repo):
            if self.root == gitdir or gitdir in self.root.parents:
                raise WalError(f"the working tree {self.root} is inside the git directory "
                               f"{gitdir}", "run gitwal from the working tree, not from "
                               "inside .git (or set GIT_WORK_TREE)")

    # -- paths -------------------------------------------------------------

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
            raise PathRefused(f"refused path {path!r}: it is a directory", _HINT)
        return rel

    def confine_any(self, path: str) -> str:
        """``path`` as a normalised tree-relative POSIX path naming a file or a
        directory (lexical checks only: for pathspecs gitwal hands to git)."""
        hint = _HINT
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
            raise PathRefused(f"refused path {rel!r}: {shown} is a symbolic link", _LINK_HINT)
        if st is None or not stat.S_ISDIR(st.st_mode):
            if lenient:
                raise NoParent(rel)
            raise PathRefused(f"refused path {rel!r}: {shown} is not a directory", _HINT)
        try:
            return open_dir_at(fd, name)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped again: refuse
                raise PathRefused(f"refused path {rel!r}: {shown} changed while gitwal "
                                  "opened it", _LINK_HINT) from None
            raise

    # -- content -----------------------------------------------------------

    def read(self, rel: str) -> tuple[bytes | None, int]:
        """The file's bytes and git mode, or ``(None, 0)`` if absent.

        A symlink's bytes are its target (never followed)."""
        try:
            with self.parent_dir(rel, lenient=True) as (dir_fd, name):
                st = lstat_at(dir_fd, name)
                if st is None:
                    return None, 0
                if stat.S_ISLNK(st.st_mode):
                    return os.readlink(os.fsencode(name), dir_fd=dir_fd), MODE_LINK
                if not stat.S_ISREG(st.st_mode):
                    raise PathRefused(f"{rel}: not a regular file", _HINT)
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                 | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError as e:
                    if e.errno == errno.ELOOP:  # swapped for a link since the lstat
                        raise PathRefused(f"{rel}: changed while gitwal read it",
                                          _LINK_HINT) from None
                    raise
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(f.fileno())
                    if not stat.S_ISREG(st.st_mode):
                        raise PathRefused(f"{rel}: not a regular file", _HINT)
                    data = f.read()
        except NoParent:
            return None, 0
        return data, MODE_EXEC if st.st_mode & 0o111 else MODE_FILE

    def state(self, rel: str) -> str:
        """The path's current object id, or ABSENT."""
        data, _ = self.read(rel)
        return ABSENT if data is None else blob_id(data)

    def write(self, rel: str, data: bytes, mode: int, tag: str) -> None:
        """Atomically set ``rel`` to ``data`` (creating parent dirs durably)."""
        with self.parent_dir(rel, create=True) as (dir_fd, name):
            if mode == MODE_LINK:
                st = lstat_at(dir_fd, name)
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    unlink_at(dir_fd, name)
                symlink_at(data, dir_fd, name)
                return
            write_at(dir_fd, name, data, 0o755 if mode == MODE_EXEC else 0o644, tag)

    def remove(self, rel: str) -> None:
        """Remove the file or symlink at ``rel`` (a directory raises IsADirectoryError)."""
        try:
            with self.parent_dir(rel, lenient=True) as (dir_fd, name):
                st = lstat_at(dir_fd, name)
                if st is None:
                    return
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "is a directory", rel)
                unlink_at(dir_fd, name)
        except NoParent:
            return

    def set_state(self, rel: str, oid: str, mode: int, tag: str) -> None:
        """Put ``rel`` into the state ``oid`` (a blob in the odb, or ABSENT)."""
        if oid == ABSENT:
            self.remove(rel)
            return
        data = self.held.get(oid)
        if data is None:
            blob = self.repo[oid]
            assert isinstance(blob, pygit2.Blob)
            data = blob.data
        self.write(rel, data, mode or MODE_FILE, tag)

    def clear_temp(self, rel: str, tag: str) -> bool:
        """Remove the temp files killed writes of ``rel`` tagged ``tag`` left
        behind (``.NAME.<tag>.*.walt``, regular files only); True if any."""
        try:
            with self.parent_dir(rel, lenient=True) as (dir_fd, name):
                prefix = temp_prefix(name, tag)
                legacy = f".{name}.{tag}{TEMP_SUFFIX}"  # the fixed name of older versions
                removed = False
                for entry in os.listdir(dir_fd):
                    if entry != legacy and not (entry.startswith(prefix)
                                                and entry.endswith(TEMP_SUFFIX)):
                        continue
                    st = lstat_at(dir_fd, entry)
                    if st is not None and stat.S_ISREG(st.st_mode):
                        os.unlink(entry, dir_fd=dir_fd)
                        removed = True
                if removed:
                    os.fsync(dir_fd)
                return removed
        except NoParent:
            return False

    def lstat(self, rel: str) -> os.stat_result | None:
        """What is at ``rel`` (a symlink itself, not its target), or None."""
        try:
            with self.parent_dir(rel, lenient=True) as (dir_fd, name):
                return lstat_at(dir_fd, name)
        except NoParent:
            return None
