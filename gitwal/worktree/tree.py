"""The working tree: content ids, reads, atomic writes and removals.

Every path is reached through :class:`ConfinedPaths` (confine.py, and its
invariant): one component at a time from the tree's root, never through a
symbolic link, at the moment of the operation. The user's index is never read
or written: snapshots (snapshot.py) use a scratch index inside the git
directory.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pygit2

from ..base.durable import TEMP_SUFFIX, temp_prefix
from ..base.durable_at import symlink_at, unlink_at, write_at
from ..base.errors import PathRefused, WalError
from ..base.ids import ABSENT, BlobId
from .confine import LINK_HINT, PATH_HINT, ConfinedPaths, NoParent, lstat_at
from .snapshot import Snapshots

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_GITLINK = 0o160000


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


class Worktree(ConfinedPaths, Snapshots):
    """The working tree through confined paths (confine.py; snapshots: snapshot.py)."""

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
                    raise PathRefused(f"{rel}: not a regular file", PATH_HINT)
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                 | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError as e:
                    if e.errno == errno.ELOOP:  # swapped for a link since the lstat
                        raise PathRefused(f"{rel}: changed while gitwal read it",
                                          LINK_HINT) from None
                    raise
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(f.fileno())
                    if not stat.S_ISREG(st.st_mode):
                        raise PathRefused(f"{rel}: not a regular file", PATH_HINT)
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
