"""Logical file-system operations, the unit of a crash state.

Operations name inodes, not paths: after a crash an earlier ``creat`` may be
lost while a later ``write`` through the same descriptor survives, and the
data then belongs to an orphan inode, not to whatever the path names now.
Inode ids are strings: ``i:<path>`` for an inode that existed in the initial
snapshot (its path there), ``n:<k>`` for the k-th inode the run created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

InodeId = str
ROOT: InodeId = "i:"

Kind = Literal["file", "dir", "symlink"]


def initial_inode(rel: str) -> InodeId:
    return "i:" + rel


@dataclass(frozen=True)
class NewInode:
    """What the trace knows about an inode the run created."""

    kind: Kind
    mode: int
    target: bytes = b""  # symlinks


@dataclass(frozen=True)
class Op:
    """Base class; ``path`` is for people (the path the process used), ``line``
    the trace line it came from."""

    path: str
    line: int

    def describe(self) -> str:
        return f"{type(self).__name__.lower()} {self.path}"


# -- directory operations (an entry of a directory) ---------------------------


@dataclass(frozen=True)
class Create(Op):
    """creat / open(O_CREAT) of a new file, mkdir, symlink."""

    parent: InodeId
    name: str
    ino: InodeId
    kind: Kind


@dataclass(frozen=True)
class Link(Op):
    parent: InodeId
    name: str
    ino: InodeId
    dst: str  # the new path, for people

    def describe(self) -> str:
        return f"link {self.path} -> {self.dst}"


@dataclass(frozen=True)
class Unlink(Op):
    """unlink or rmdir of the entry ``name`` (that named ``ino`` in the run)."""

    parent: InodeId
    name: str
    ino: InodeId


@dataclass(frozen=True)
class Rename(Op):
    sparent: InodeId
    sname: str
    dparent: InodeId
    dname: str
    ino: InodeId
    replaced: InodeId | None  # the inode the destination named before, if any
    dst: str

    def describe(self) -> str:
        return f"rename {self.path} -> {self.dst}"


# -- data operations (the contents, size or mode of one inode) ----------------


@dataclass(frozen=True)
class Write(Op):
    ino: InodeId
    offset: int
    data: bytes

    def describe(self) -> str:
        return f"write {self.path} [{self.offset}, +{len(self.data)})"


@dataclass(frozen=True)
class Truncate(Op):
    ino: InodeId
    size: int

    def describe(self) -> str:
        return f"truncate {self.path} to {self.size}"


@dataclass(frozen=True)
class Chmod(Op):
    ino: InodeId
    mode: int

    def describe(self) -> str:
        return f"chmod {self.path} {self.mode:o}"


# -- barriers and hints --------------------------------------------------------


@dataclass(frozen=True)
class Fsync(Op):
    """fsync (``data_only``: fdatasync) of a file or directory."""

    ino: InodeId
    data_only: bool

    def describe(self) -> str:
        return f"{'fdatasync' if self.data_only else 'fsync'} {self.path}"


@dataclass(frozen=True)
class SyncAll(Op):
    """sync() or syncfs() on the repository's file system."""

    def describe(self) -> str:
        return "syncfs"


@dataclass(frozen=True)
class Writeback(Op):
    """sync_file_range(WRITE|WAIT_AFTER): data handed to the disk, no cache
    flush, no metadata. Not a barrier; the ext4-like model uses it."""

    ino: InodeId


DIR_OPS = (Create, Link, Unlink, Rename)
DATA_OPS = (Write, Truncate, Chmod)
BARRIERS = (Fsync, SyncAll)


def dirs_of(op: Op) -> tuple[InodeId, ...]:
    """The directories whose entries ``op`` changes."""
    if isinstance(op, Create | Link | Unlink):
        return (op.parent,)
    if isinstance(op, Rename):
        return (op.sparent,) if op.sparent == op.dparent else (op.sparent, op.dparent)
    return ()


def data_inode(op: Op) -> InodeId | None:
    """The inode whose contents, size or mode ``op`` changes."""
    if isinstance(op, Write | Truncate | Chmod):
        return op.ino
    return None
