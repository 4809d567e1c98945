"""Reading back the kept packs gitwal wrote (packwrite.py), and merging them.

Packs gitwal keeps are merged by size tier (:func:`merge_tier`), so their
number stays bounded as a log grows and what one merge rewrites is bounded
by its tier's limit. A merge copies each object's stored entry (header and
deflated bytes) as it is, found through the pack's index: nothing is
inflated or deflated again (docs/performance.md). Objects of runs dropped
since are carried along (docs/format.md, "Packs").
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from ..base.durable import fsync_dir
from .packwrite import CODE_TYPE, KEEP_MESSAGE, RawObject, assemble, entry_of, write_kept

# Packs gitwal keeps are merged by size tier (see merge_tier()): once a tier
# holds MERGE_AT packs, every pack below its limit is merged into one. At most
# MERGE_AT - 1 packs wait in each tier: the pack count stays bounded as a log
# grows, and what a merge rewrites is bounded by its tier's limit.
MERGE_AT = 32
MERGE_LIMITS = (1 << 20, 32 << 20)


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
        if code not in CODE_TYPE:
            raise ValueError(f"{path.name}: object type {code} (gitwal writes no deltas)")
        inflate = zlib.decompressobj()
        body = inflate.decompress(view[pos:])  # stops at the end of the stream
        if not inflate.eof or len(body) != size:
            raise ValueError(f"{path.name}: a truncated object")
        pos = len(view) - len(inflate.unused_data)
        out.append(RawObject(CODE_TYPE[code], body))
    return out


def pack_entries(path: Path) -> list[tuple[bytes, bytes]]:
    """(binary id, entry as stored) for every object of a pack gitwal wrote,
    found through its index: what a merge copies without inflating or
    deflating anything. Both files' checksums and every entry's CRC-32 are
    checked, so a damaged pack is refused, never carried into a new one."""
    data = path.read_bytes()
    idx = path.with_suffix(".idx").read_bytes()
    if (data[:4] != b"PACK" or hashlib.sha1(data[:-20]).digest() != data[-20:]
            or idx[:8] != b"\xfftOc\0\0\0\2" or len(idx) < 8 + 1024 + 40
            or hashlib.sha1(idx[:-20]).digest() != idx[-20:] or idx[-40:-20] != data[-20:]):
        raise ValueError(f"{path.name}: not an intact pack and index")
    (count,) = struct.unpack(">I", data[8:12])
    if count == 0:
        return []
    (total,) = struct.unpack(">I", idx[8 + 1020 : 8 + 1024])
    ids_at = 8 + 1024
    crcs_at = ids_at + 20 * count
    offs_at = crcs_at + 4 * count
    if total != count or offs_at + 4 * count + 40 > len(idx):
        raise ValueError(f"{path.name}: its index does not match the pack")
    crcs = struct.unpack(f">{count}I", idx[crcs_at:offs_at])
    offsets = struct.unpack(f">{count}I", idx[offs_at : offs_at + 4 * count])
    if any(off & 0x80000000 for off in offsets):
        raise ValueError(f"{path.name}: over 2 GiB (gitwal's packs are small)")
    order = sorted(range(count), key=offsets.__getitem__)
    ends = [offsets[i] for i in order[1:]] + [len(data) - 20]
    out = []
    for i, end in zip(order, ends, strict=True):
        entry = data[offsets[i] : end]
        if not entry or (entry[0] >> 4) & 7 not in CODE_TYPE or zlib.crc32(entry) != crcs[i]:
            raise ValueError(f"{path.name}: a damaged object (or a delta: gitwal writes none)")
        out.append((idx[ids_at + 20 * i : ids_at + 20 * i + 20], entry))
    if order and offsets[order[0]] != 12:
        raise ValueError(f"{path.name}: its index does not match the pack")
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
    entries: dict[bytes, bytes] = {}
    merged = []
    for pack in small:
        try:
            found = pack_entries(pack)
        except (OSError, ValueError):
            try:
                # A crash between the .pack and the .idx left no index: read
                # the pack itself (its checksum holds), as git's index-pack would.
                found = [(bytes.fromhex(o.oid), entry_of(o)) for o in read_pack(pack)]
            except (OSError, ValueError):
                continue  # damaged (or merged away meanwhile): left as it is, never deleted
        merged.append(pack)
        for binary, entry in found:
            entries.setdefault(binary, entry)
    if not entries:
        return None
    name = write_kept(objects_dir, *assemble(list(entries.items())))
    for pack in merged:
        if pack.stem == name:
            continue
        # The index first: git and libgit2 find a pack through its .idx.
        for suffix in (".idx", ".pack", ".keep"):
            pack.with_suffix(suffix).unlink(missing_ok=True)
    fsync_dir(objects_dir / "pack")
    return name
