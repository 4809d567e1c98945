"""An in-memory file-system image over a snapshot directory.

The image starts as the snapshot (loaded lazily: a directory's entries or a
file's bytes are read only when an operation needs them) and changes by
applying :mod:`.ops`. Inodes the run created and whose creation a crash state
drops still exist here as orphans: data written to them is kept, and becomes
visible if a later surviving ``link``/``rename`` names them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import os
import posixpath
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .ops import (
    ROOT,
    Chmod,
    Create,
    InodeId,
    Kind,
    Link,
    NewInode,
    Op,
    Rename,
    Truncate,
    Unlink,
    Write,
    initial_inode,
)


@dataclass
class Inode:
    kind: Kind
    mode: int  # permission bits
    origin: str | None  # path in the snapshot (initial inodes only)
    data: bytearray | None = None  # files: None until loaded
    entries: dict[str, InodeId] | None = None  # dirs: None until loaded
    target: bytes = b""  # symlinks
    touched: bool = False  # changed since the snapshot (or new)
    body: str | None = None  # cached hash of ``data``


@dataclass
class Image:
    """Inodes are shared between an image and its clones until one of them
    changes an inode (copy on write); loading from the snapshot is not a change."""

    snapshot: Path
    new_inodes: Mapping[InodeId, NewInode]
    inodes: dict[InodeId, Inode] = field(default_factory=dict)
    owned: set[InodeId] = field(default_factory=set)  # inodes no clone shares

    # -- inodes ------------------------------------------------------------

    def node(self, ino: InodeId) -> Inode:
        found = self.inodes.get(ino)
        if found is not None:
            return found
        if ino.startswith("i:"):
            rel = ino[2:]
            st = os.lstat(self.snapshot / rel)
            kind: Kind = (
                "dir" if stat.S_ISDIR(st.st_mode)
                else "symlink" if stat.S_ISLNK(st.st_mode)
                else "file"
            )
            node = Inode(kind, stat.S_IMODE(st.st_mode), rel)
            if kind == "symlink":
                node.target = os.fsencode(os.readlink(self.snapshot / rel))
        else:
            spec = self.new_inodes[ino]
            node = Inode(spec.kind, spec.mode, None, target=spec.target, touched=True)
            if spec.kind == "file":
                node.data = bytearray()
            elif spec.kind == "dir":
                node.entries = {}
        self.inodes[ino] = node
        self.owned.add(ino)
        return node

    def entries(self, ino: InodeId) -> dict[str, InodeId]:
        node = self.node(ino)
        if node.kind != "dir":
            raise NotADirectoryError(ino)
        if node.entries is None:
            assert node.origin is not None
            base = self.snapshot / node.origin
            prefix = node.origin + "/" if node.origin else ""
            node.entries = {name: "i:" + prefix + name for name in sorted(os.listdir(base))}
        return node.entries

    def data(self, ino: InodeId) -> bytearray:
        node = self.node(ino)
        if node.kind != "file":
            raise IsADirectoryError(ino)
        if node.data is None:
            assert node.origin is not None
            node.data = bytearray((self.snapshot / node.origin).read_bytes())
        return node.data

    def clone(self) -> Image:
        """An independent copy; both then copy an inode before changing it."""
        self.owned = set()
        return Image(self.snapshot, self.new_inodes, dict(self.inodes))

    def _own(self, ino: InodeId) -> Inode:
        """The inode, ready to change: copied first if a clone may share it."""
        node = self.node(ino)
        if ino not in self.owned:
            node = dataclasses.replace(
                node,
                data=None if node.data is None else bytearray(node.data),
                entries=None if node.entries is None else dict(node.entries),
            )
            self.inodes[ino] = node
            self.owned.add(ino)
        node.touched = True
        node.body = None
        if ino.startswith("i:"):  # load the snapshot ancestors, so walks reach it
            parts = ino[2:].split("/")
            for n in range(len(parts)):
                self.entries(initial_inode("/".join(parts[:n])))
        return node

    # -- paths -------------------------------------------------------------

    def lookup(self, rel: str) -> InodeId | None:
        """The inode ``rel`` names (``""`` is the root), or None."""
        ino = ROOT
        for part in (p for p in rel.split("/") if p):
            if self.node(ino).kind != "dir":
                return None
            child = self.entries(ino).get(part)
            if child is None:
                return None
            ino = child
        return ino

    def read(self, rel: str) -> bytes | None:
        ino = self.lookup(rel)
        if ino is None or self.node(ino).kind != "file":
            return None
        return bytes(self.data(ino))

    # -- operations --------------------------------------------------------

    def _entries_to_change(self, parent: InodeId) -> dict[str, InodeId]:
        self.entries(parent)
        node = self._own(parent)
        assert node.entries is not None
        return node.entries

    def _data_to_change(self, ino: InodeId) -> bytearray:
        self.data(ino)
        node = self._own(ino)
        assert node.data is not None
        return node.data

    def apply(self, op: Op, data: bytes | None = None) -> None:
        """Apply one operation; ``data`` replaces a write's bytes (a torn write)."""
        if isinstance(op, Create | Link):
            self.node(op.ino)
            self._entries_to_change(op.parent)[op.name] = op.ino
        elif isinstance(op, Unlink):
            entries = self._entries_to_change(op.parent)
            if entries.get(op.name) == op.ino:
                del entries[op.name]
        elif isinstance(op, Rename):
            self.node(op.ino)
            src = self._entries_to_change(op.sparent)
            if src.get(op.sname) == op.ino:
                del src[op.sname]
            self._entries_to_change(op.dparent)[op.dname] = op.ino
        elif isinstance(op, Write):
            buf = self._data_to_change(op.ino)
            payload = op.data if data is None else data
            if op.offset > len(buf):
                buf.extend(bytes(op.offset - len(buf)))
            buf[op.offset : op.offset + len(payload)] = payload
        elif isinstance(op, Truncate):
            buf = self._data_to_change(op.ino)
            if op.size < len(buf):
                del buf[op.size :]
            else:
                buf.extend(bytes(op.size - len(buf)))
        elif isinstance(op, Chmod):
            self._own(op.ino).mode = op.mode
        # barriers and writeback hints change nothing

    # -- comparison --------------------------------------------------------

    def walk(self) -> Iterator[tuple[str, InodeId, Inode]]:
        """Every path reachable from the root with its inode, parents first."""
        stack: list[tuple[str, InodeId]] = [("", ROOT)]
        while stack:
            rel, ino = stack.pop()
            node = self.node(ino)
            yield rel, ino, node
            if node.kind == "dir":
                for name, child in sorted(self.entries(ino).items(), reverse=True):
                    stack.append((posixpath.join(rel, name) if rel else name, child))

    def unchanged(self, rel: str, node: Inode) -> bool:
        """True when ``rel`` is exactly what the snapshot holds there."""
        return not node.touched and node.origin == rel

    def digest(self, ignore: Sequence[str] = ()) -> str:
        """Identifies the visible state: equal digests, equal directory trees
        (paths matching a glob in ``ignore``, and what is under them, left out)."""
        skip = re.compile("|".join(fnmatch.translate(p) for p in ignore)) if ignore else None
        h = hashlib.sha256()
        stack: list[tuple[str, InodeId]] = [("", ROOT)]
        while stack:
            rel, ino = stack.pop()
            if skip is not None and skip.match(rel):
                continue
            if ino not in self.inodes and ino == "i:" + rel:
                h.update(f"= {rel}\0".encode())  # never loaded: as in the snapshot
                continue
            node = self.node(ino)
            if node.kind == "dir" and node.entries is None and self.unchanged(rel, node):
                h.update(f"= {rel}\0".encode())
                continue
            if node.kind == "file":
                if self.unchanged(rel, node):
                    h.update(f"= {rel}\0".encode())
                else:
                    if node.body is None:
                        node.body = hashlib.sha256(self.data(ino)).hexdigest()
                    h.update(f"F {rel} {node.mode:o} {node.body}\0".encode())
                continue
            if node.kind == "symlink":
                h.update(f"L {rel} ".encode() + node.target + b"\0")
                continue
            h.update(f"D {rel} {node.mode:o}\0".encode())
            prefix = rel + "/" if rel else ""
            for name, child in sorted(self.entries(ino).items(), reverse=True):
                stack.append((prefix + name, child))
        return h.hexdigest()
