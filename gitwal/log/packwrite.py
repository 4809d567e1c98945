"""Objects written as one small git pack that ``git gc`` never deletes.

An append's objects (record blobs, its tree, its commit, and the loose
objects its records name) are unreachable until the log's ref moves. Written
as loose objects, a concurrent ``git gc --prune=now`` may delete them in that
window, or after the ref moved if its walk of the refs came first. Written
here instead, they are born inside a pack that has a ``.keep`` file:
``git repack`` leaves kept packs alone and ``git prune`` deletes only loose
objects, so no gc removes them, whatever it walked when.

Durability, docs/format.md "Packs": the ``.keep`` file is created first (a
gc that sees the pack sees it kept), the ``.pack`` and then the ``.idx`` are
written to temp names, fsynced and renamed (git reads a pack only through
its ``.idx``), then one fsync of ``objects/pack`` makes all three entries
durable. A crash before that leaves at most a pack no ref names, which gc
may drop once it is unkept (:func:`merge`).

The format is git's pack v2 (objects whole, zlib-deflated, no deltas) with
an index v2; SHA-1 object ids.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..base.durable import fsync_dir, place

COMMIT, TREE, BLOB = "commit", "tree", "blob"
_TYPE_CODE = {COMMIT: 1, TREE: 2, BLOB: 3}
_CODE_TYPE = {v: k for k, v in _TYPE_CODE.items()}
KEEP_MESSAGE = b"gitwal: objects of write-ahead log appends\n"
MODE_BLOB, MODE_TREE = 0o100644, 0o040000
# Packs gitwal keeps are merged by size tier (see merge_tier()): once a tier
# holds MERGE_AT packs, every pack below its limit is merged into one. At most
# MERGE_AT - 1 packs wait in each tier: the pack count stays bounded as a log
# grows, and what a merge rewrites is bounded by its tier's limit.
MERGE_AT = 32
MERGE_LIMITS = (1 << 20, 32 << 20)


@dataclass(frozen=True)
class RawObject:
    kind: str  # COMMIT | TREE | BLOB
    data: bytes

    @property
    def oid(self) -> str:
        return object_id(self.kind, self.data)


def object_id(kind: str, data: bytes) -> str:
    """The SHA-1 git object id of ``data`` as an object of type ``kind``."""
    return hashlib.sha1(b"%s %d\0" % (kind.encode(), len(data)) + data).hexdigest()


def tree_data(entries: Iterable[tuple[str, int, str]]) -> bytes:
    """A tree object's content from (name, mode, hex id), in git's entry order
    (by name, a tree's name compared as if it ended in ``/``); one entry per name."""
    unique = {name: (mode, oid) for name, mode, oid in entries}

    def key(name: str) -> bytes:
        return name.encode() + (b"/" if unique[name][0] == MODE_TREE else b"")

    out = bytearray()
    for name in sorted(unique, key=key):
        mode, oid = unique[name]
        out += b"%o %s\0" % (mode, name.encode()) + bytes.fromhex(oid)
    return bytes(out)


def commit_data(tree: str, parents: Sequence[str], author: bytes, message: bytes,
                committer: bytes | None = None) -> bytes:
    """An (unsigned) commit's content; an ident is ``Name <email> time +zone``
    (the committer defaults to the author)."""
    lines = [b"tree " + tree.encode()]
    lines += [b"parent " + p.encode() for p in parents]
    lines += [b"author " + author, b"committer " + (committer or author)]
    return b"\n".join(lines) + b"\n\n" + message


class Signer(Protocol):
    """What the log layer needs to sign an append: it is handed one
    (signing/signer.py has the key-backed one) and imports no signing code."""

    @property
    def fingerprint(self) -> str: ...

    def sign(self, content: bytes) -> str:
        """The armored signature for the raw (unsigned) commit content, as
        ``git commit -S`` (gpg.format=ssh) makes it."""
        ...


def with_signature(content: bytes, signature: str) -> bytes:
    """``content`` with a ``gpgsig`` header as git writes it (after the last
    header line; continuation lines start with a space)."""
    head, _, message = content.partition(b"\n\n")
    sig = signature.rstrip("\n").replace("\n", "\n ").encode()
    return head + b"\ngpgsig " + sig + b"\n\n" + message


def _entry_header(code: int, size: int) -> bytes:
    out = bytearray()
    byte = (code << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def pack_bytes(objects: Sequence[RawObject]) -> tuple[bytes, bytes, list[str]]:
    """(pack, index, object ids) for ``objects`` (duplicates written once)."""
    seen: dict[str, RawObject] = {}
    for obj in objects:
        seen.setdefault(obj.oid, obj)
    pack = bytearray(b"PACK" + struct.pack(">II", 2, len(seen)))
    rows: list[tuple[bytes, int, int]] = []  # (binary id, crc32, offset)
    for oid, obj in seen.items():
        entry = _entry_header(_TYPE_CODE[obj.kind], len(obj.data)) + zlib.compress(obj.data, 1)
        rows.append((bytes.fromhex(oid), zlib.crc32(entry), len(pack)))
        pack += entry
    pack += hashlib.sha1(pack).digest()
    rows.sort()
    idx = bytearray(b"\xfftOc" + struct.pack(">I", 2))
    counts = [0] * 256
    for binary, _crc, _off in rows:
        counts[binary[0]] += 1
    total = 0
    for c in counts:
        total += c
        idx += struct.pack(">I", total)
    for binary, _crc, _off in rows:
        idx += binary
    for _binary, crc, _off in rows:
        idx += struct.pack(">I", crc)
    large: list[int] = []
    for _binary, _crc, off in rows:
        if off < 0x80000000:
            idx += struct.pack(">I", off)
        else:
            idx += struct.pack(">I", 0x80000000 | len(large))
            large.append(off)
    for off in large:
        idx += struct.pack(">Q", off)
    idx += pack[-20:]
    idx += hashlib.sha1(idx).digest()
    return bytes(pack), bytes(idx), list(seen)


def _intact(pack: Path, size: int, idx: Path) -> bool:
    """Whether the same pack (its name is its checksum) is there in full already."""
    try:
        return pack.stat().st_size == size and idx.stat().st_size > 0
    except OSError:
        return False


def write_kept_pack(objects_dir: Path, objects: Sequence[RawObject]) -> str:
    """Write ``objects`` as one kept pack in ``objects_dir/pack``; returns its name
    (``pack-<checksum>``). Durable when this returns."""
    pack, idx, _oids = pack_bytes(objects)
    directory = objects_dir / "pack"
    name = "pack-" + pack[-20:].hex()
    # The .keep first: no moment exists at which gc can see this pack unkept.
    try:
        fd = os.open(directory / f"{name}.keep",
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        pass  # the same objects packed before (a pack's name is its checksum)
    else:
        try:
            os.write(fd, KEEP_MESSAGE)
        finally:
            os.close(fd)
    if not _intact(directory / f"{name}.pack", len(pack), directory / f"{name}.idx"):
        place(directory / f"{name}.pack", pack, 0o444, "p")
        place(directory / f"{name}.idx", idx, 0o444, "p")
    fsync_dir(directory)
    return name


# -- reading back what gitwal packed (for merge) -------------------------------


def kept_packs(objects_dir: Path) -> list[Path]:
    """The ``.pack`` files of packs gitwal wrote and keeps (their ``.keep``
    holds :data:`KEEP_MESSAGE`), oldest first."""
    out = []
    for keep in (objects_dir / "pack").glob("pack-*.keep"):
        try:
            if keep.read_bytes() != KEEP_MESSAGE:
                continue
            pack = keep.with_suffix(".pack")
            out.append((pack.stat().st_mtime_ns, pack))
        except OSError:
            continue  # merged away meanwhile
    return [p for _t, p in sorted(out)]


def read_pack(path: Path) -> list[RawObject]:
    """Every object of a pack gitwal wrote (whole objects, no deltas)."""
    data = path.read_bytes()
    if data[:4] != b"PACK" or hashlib.sha1(data[:-20]).digest() != data[-20:]:
        raise ValueError(f"{path.name}: not an intact pack")
    (count,) = struct.unpack(">I", data[8:12])
    view = memoryview(data)[:-20]
    pos, out = 12, []
    for _ in range(count):
        byte = data[pos]
        pos += 1
        code, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
        while byte & 0x80:
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
        if code not in _CODE_TYPE:
            raise ValueError(f"{path.name}: object type {code} (gitwal writes no deltas)")
        inflate = zlib.decompressobj()
        body = inflate.decompress(view[pos:])  # stops at the end of the stream
        if not inflate.eof or len(body) != size:
            raise ValueError(f"{path.name}: a truncated object")
        pos = len(view) - len(inflate.unused_data)
        out.append(RawObject(_CODE_TYPE[code], body))
    return out


def merge_tier(sizes: Sequence[int]) -> int | None:
    """The limit of the smallest tier that holds :data:`MERGE_AT` packs of
    its own size (given the sizes of gitwal's kept packs), or None: nothing
    to merge. A tier's merge takes every pack below its limit. Counting only
    a tier's own packs matters: a large pack merged again whenever small ones
    pile up would be rewritten every MERGE_AT appends (quadratic)."""
    lower = 0
    for limit in MERGE_LIMITS:
        if sum(1 for size in sizes if lower <= size < limit) >= MERGE_AT:
            return limit
        lower = limit
    return None


def merge(objects_dir: Path) -> str | None:
    """Merge gitwal's kept packs of the smallest tier that holds
    :data:`MERGE_AT` of them (:func:`merge_tier`) into one kept pack; returns
    the new pack's name, or None.

    The new pack (with its ``.keep``) is durable before any old pack is
    removed, so every object stays in some kept pack at every instant. The
    caller holds the merge lock (one merger per repository). Objects of runs
    dropped since are carried along (docs/format.md, "Packs").
    """
    sized = [(p, p.stat().st_size) for p in kept_packs(objects_dir)]
    limit = merge_tier([size for _p, size in sized])
    if limit is None:
        return None
    small = [p for p, size in sized if size < limit]
    objects: list[RawObject] = []
    for pack in small:
        objects.extend(read_pack(pack))
    name = write_kept_pack(objects_dir, objects)
    for pack in small:
        if pack.stem == name:
            continue
        # The index first: git and libgit2 find a pack through its .idx.
        for suffix in (".idx", ".pack", ".keep"):
            pack.with_suffix(suffix).unlink(missing_ok=True)
    fsync_dir(objects_dir / "pack")
    return name
