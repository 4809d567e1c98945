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
CODE_TYPE = {v: k for k, v in _TYPE_CODE.items()}
KEEP_MESSAGE = b"gitwal: objects of write-ahead log appends\n"
MODE_BLOB, MODE_TREE = 0o100644, 0o040000


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


def entry_of(obj: RawObject) -> bytes:
    """``obj`` as a pack stores it: its type and size header, then its bytes deflated."""
    return _entry_header(_TYPE_CODE[obj.kind], len(obj.data)) + zlib.compress(obj.data, 1)


def pack_bytes(objects: Sequence[RawObject]) -> tuple[bytes, bytes, list[str]]:
    """(pack, index, object ids) for ``objects`` (duplicates written once)."""
    seen: dict[str, RawObject] = {}
    for obj in objects:
        seen.setdefault(obj.oid, obj)
    entries = [(bytes.fromhex(oid), entry_of(obj)) for oid, obj in seen.items()]
    pack, idx = assemble(entries)
    return pack, idx, list(seen)


def assemble(entries: Sequence[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """(pack, index) from (binary id, pack entry: type/size header and the
    deflated object), ids unique; entries are copied as they are."""
    offsets: list[int] = []
    at = 12
    for _binary, entry in entries:
        offsets.append(at)
        at += len(entry)
    body = b"".join([b"PACK", struct.pack(">II", 2, len(entries)),
                     *(entry for _binary, entry in entries)])
    pack = body + hashlib.sha1(body).digest()
    rows = sorted((binary, zlib.crc32(entry), off)
                  for (binary, entry), off in zip(entries, offsets, strict=True))
    counts = [0] * 256
    for binary, _crc, _off in rows:
        counts[binary[0]] += 1
    fanout = []
    total = 0
    for c in counts:
        total += c
        fanout.append(total)
    small = [off if off < 0x80000000 else 0 for _b, _c, off in rows]
    large = [off for _b, _c, off in rows if off >= 0x80000000]
    # An offset past 2 GiB is stored as an index into the 8-byte table that follows.
    n_large = 0
    for i, (_b, _c, off) in enumerate(rows):
        if off >= 0x80000000:
            small[i] = 0x80000000 | n_large
            n_large += 1
    n = len(rows)
    idx = b"".join([
        b"\xfftOc", struct.pack(">I", 2), struct.pack(">256I", *fanout),
        *(binary for binary, _c, _o in rows),
        struct.pack(f">{n}I", *(crc for _b, crc, _o in rows)),
        struct.pack(f">{n}I", *small), struct.pack(f">{len(large)}Q", *large),
        pack[-20:],
    ])
    return pack, idx + hashlib.sha1(idx).digest()


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
    return write_kept(objects_dir, pack, idx)


def write_kept(objects_dir: Path, pack: bytes, idx: bytes) -> str:
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
