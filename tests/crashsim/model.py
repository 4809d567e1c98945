"""Persistence models: which operations a crash after the k-th one may lose.

A crash state is ``(crash, survivors, torn)``: the first ``crash`` operations
were issued; every operation a completed barrier made durable survives; of the
others (*unpersisted*), exactly ``survivors`` reached the disk, replayed in
trace order; ``torn`` optionally cuts one surviving write short.

Two models decide what a barrier persists:

``conservative`` (ALICE-like: nothing is durable unless explicitly made so)
    * fsync(file) persists that file's data, size and mode, *not* its name:
      the entry that names a new file is durable only once its directory is
      fsynced; fdatasync persists data and size, not the mode;
    * fsync(dir) persists that directory's entries (creations, links, renames
      in and out, unlinks); a rename between two directories is durable only
      once both are fsynced (until then it survives or vanishes as a whole);
    * sync_file_range is not a barrier (no metadata, no cache flush);
      sync/syncfs persist everything (model ``fuse``: nothing, as on a FUSE
      mount, where they never reach the file system's daemon);
    * unpersisted operations survive in any combination; the enumeration
      favours per-object prefixes (a file's writes, a directory's entry
      changes, each in issue order), single survivors and torn last writes.

``ext4`` (data=ordered, delayed allocation, auto_da_alloc, as Linux ext4 behaves)
    * every entry change, truncate and mode change goes into one journal,
      committed in order: any fsync/fdatasync/sync commits everything issued
      before it, and a crash keeps a prefix of the uncommitted rest;
    * a file's data is durable after fsync of that file, or after a commit
      that follows a sync_file_range(WAIT_AFTER) of it; a rename over an
      existing file flushes the renamed file's data first (auto_da_alloc);
      other data survives as a per-file prefix of its writes, never as garbage.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .image import Image
from .ops import (
    DATA_OPS,
    DIR_OPS,
    Chmod,
    Fsync,
    InodeId,
    Op,
    Rename,
    SyncAll,
    Truncate,
    Write,
    Writeback,
    data_inode,
    dirs_of,
)
from .trace import Trace

NEVER = 1 << 62

TornKind = Literal["prefix", "zeros"]


@dataclass(frozen=True)
class Torn:
    """The write ``op`` reached the disk only in part: its first half
    (``prefix``), or its first half then zeros up to its full length (``zeros``:
    the size was updated, the data blocks were not)."""

    op: int
    kind: TornKind

    def data(self, write: Write) -> bytes:
        keep = len(write.data) // 2
        if self.kind == "prefix":
            return write.data[:keep]
        return write.data[:keep] + bytes(len(write.data) - keep)


@dataclass(frozen=True)
class CrashState:
    crash: int  # operations [0, crash) were issued before power was lost
    survivors: frozenset[int]  # unpersisted operations that reached the disk anyway
    torn: Torn | None = None
    label: str = ""

    def describe(self, ops: Sequence[Op]) -> str:
        last = f"op {self.crash - 1}: {ops[self.crash - 1].describe()}" if self.crash else "-"
        text = f"power lost after {self.crash} ops (last {last}); {self.label}"
        if self.torn is not None:
            text += f"; op {self.torn.op} torn ({self.torn.kind})"
        return text


def _is_mutation(op: Op) -> bool:
    return isinstance(op, DIR_OPS + DATA_OPS)


class Model:
    """Base: ``persist_at[j]`` is the index of the barrier that makes op j
    durable (NEVER if none does)."""

    name = "base"

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.ops = trace.ops
        self.mutations = [j for j, op in enumerate(self.ops) if _is_mutation(op)]
        self.persist_at = self._persist_at()
        self.barrier_list = self.barriers()
        self._unpersisted: dict[int, list[int]] = {}

    def _persist_at(self) -> list[int]:
        raise NotImplementedError

    def barriers(self) -> list[int]:
        return [j for j, op in enumerate(self.ops) if isinstance(op, Fsync | SyncAll)]

    def crash_points(self) -> list[int]:
        """Right before and right after every barrier, and the end of the run."""
        points = {0, len(self.ops)}
        for b in self.barriers():
            points.update((b, b + 1))
        return sorted(points)

    def fresh(self, crash: int, unpersisted: Sequence[int]) -> list[int]:
        """Unpersisted ops issued since the last barrier before ``crash``: the
        enumeration varies these one by one and older ones only in bulk (their
        one-by-one variants were explored at the crash points of their epoch)."""
        barriers = self.barrier_list
        i = bisect.bisect_left(barriers, crash - 1)
        since = barriers[i - 1] if i else -1
        return [j for j in unpersisted if j > since]

    def issued(self, crash: int) -> list[int]:
        return self.mutations[: bisect.bisect_left(self.mutations, crash)]

    def unpersisted(self, crash: int) -> list[int]:
        cached = self._unpersisted.get(crash)
        if cached is None:
            cached = [j for j in self.issued(crash) if self.persist_at[j] >= crash]
            self._unpersisted[crash] = cached
        return cached

    def applied(self, state: CrashState) -> list[int]:
        """The operations a state replays, in trace order."""
        return [
            j for j in self.issued(state.crash)
            if self.persist_at[j] < state.crash or j in state.survivors
        ]

    def variants(self, crash: int) -> Iterator[tuple[frozenset[int], Torn | None, str]]:
        raise NotImplementedError

    def states(self) -> Iterator[CrashState]:
        """Every crash state of the enumeration (with repeats; see :func:`distinct`)."""
        for crash in self.crash_points():
            for survivors, torn, label in self.variants(crash):
                yield CrashState(crash, self.close(survivors, crash), torn, label)

    def close(self, survivors: frozenset[int], crash: int) -> frozenset[int]:
        """Add what the model forces along with ``survivors`` (default: nothing)."""
        del crash
        return survivors

    def key(self, state: CrashState) -> tuple[int, frozenset[int], Torn | None]:
        """Equal keys, equal states (barriers change nothing on disk)."""
        issued = self.issued(state.crash)
        last = issued[-1] if issued else -1
        dropped = frozenset(set(self.unpersisted(state.crash)) - state.survivors)
        return last, dropped, state.torn

    def image(self, state: CrashState, snapshot: Path) -> Image:
        image = self.trace.image(snapshot)
        for j in self.applied(state):
            op = self.ops[j]
            if state.torn is not None and state.torn.op == j:
                assert isinstance(op, Write)
                image.apply(op, state.torn.data(op))
            else:
                image.apply(op)
        return image

    def monotone(self) -> bool:
        """True when, for every object, ops persist in issue order (so that a
        state is its persisted ops, then its survivors: what :class:`Builder`
        relies on). Ops on different objects commute in :class:`Image`."""
        last: dict[str, int] = {}
        for j in self.mutations:
            op = self.ops[j]
            keys = ["dir " + d for d in dirs_of(op)]
            if isinstance(op, Chmod):
                keys.append("mode " + op.ino)
            elif isinstance(op, Write | Truncate):
                keys.append("data " + op.ino)
            for k in keys:
                if self.persist_at[j] < last.get(k, -1):
                    return False
                last[k] = self.persist_at[j]
        return True

    def durable(self, crash: int) -> CrashState:
        """The state where every unpersisted operation was lost."""
        return CrashState(crash, frozenset(), None, "all unpersisted ops lost")

    # -- helpers for the enumerations --------------------------------------

    def objects(self, unpersisted: Sequence[int]) -> dict[str, list[int]]:
        """Unpersisted ops by the object they change, each list in issue order."""
        groups: dict[str, list[int]] = defaultdict(list)
        for j in unpersisted:
            op = self.ops[j]
            ino = data_inode(op)
            if ino is not None:
                groups["data " + ino].append(j)
            for d in dirs_of(op):
                groups["dir " + d].append(j)
        return dict(groups)

    def torn_candidates(self, unpersisted: Sequence[int]) -> dict[InodeId, int]:
        """Per file, its last unpersisted data op when that op is a write."""
        last: dict[InodeId, int] = {}
        for j in unpersisted:
            ino = data_inode(self.ops[j])
            if ino is not None:
                last[ino] = j
        return {ino: j for ino, j in last.items() if isinstance(self.ops[j], Write)}


class Conservative(Model):
    name = "conservative"
    sync_all_persists = True  # sync/syncfs persist everything (not on FUSE: Fuse)

    def _persist_at(self) -> list[int]:
        out = [NEVER] * len(self.ops)
        next_full: dict[InodeId, int] = {}
        next_any: dict[InodeId, int] = {}
        next_all = NEVER
        for j in range(len(self.ops) - 1, -1, -1):
            op = self.ops[j]
            if isinstance(op, SyncAll):
                if self.sync_all_persists:
                    next_all = j
            elif isinstance(op, Fsync):
                next_any[op.ino] = j
                if not op.data_only:
                    next_full[op.ino] = j
            elif isinstance(op, Write | Truncate):
                out[j] = min(next_any.get(op.ino, NEVER), next_all)
            elif isinstance(op, Chmod):
                out[j] = min(next_full.get(op.ino, NEVER), next_all)
            elif isinstance(op, DIR_OPS):
                out[j] = min(max(next_full.get(d, NEVER) for d in dirs_of(op)), next_all)
        return out

    def variants(self, crash: int) -> Iterator[tuple[frozenset[int], Torn | None, str]]:
        unp = self.unpersisted(crash)
        fresh = set(self.fresh(crash, unp))
        everything = frozenset(unp)
        yield frozenset(), None, "all unpersisted ops lost"
        if not unp:
            return
        yield everything, None, "all unpersisted ops survive"
        for j in sorted(fresh):
            yield frozenset({j}), None, f"only op {j} survives"
            yield everything - {j}, None, f"all but op {j} survive"
            yield frozenset(k for k in unp if k < j), None, f"ops before {j} survive"
        for name, group in self.objects(unp).items():
            if fresh.isdisjoint(group):
                continue
            rest = everything - set(group)
            for n in range(1, len(group)):
                yield frozenset(group[:n]), None, f"only {n} op(s) of {name} survive"
            for n in range(len(group)):
                yield rest | frozenset(group[:n]), None, f"{name} keeps {n} op(s), rest survive"
        for ino, j in self.torn_candidates(unp).items():
            if j not in fresh:
                continue
            mine = frozenset(k for k in unp if data_inode(self.ops[k]) == ino)
            for kind in ("prefix", "zeros"):
                torn = Torn(j, kind)
                yield everything, torn, f"all survive, last write of {ino} torn"
                yield mine, torn, f"only {ino}'s data survives, last write torn"


class Fuse(Conservative):
    """``conservative``, on a FUSE mount: syncfs and sync persist nothing.

    Linux answers syncfs(2) on a FUSE file system without asking the daemon to
    flush (fuse-overlayfs, sshfs, LazyFS), and sync(2) writes back only the
    kernel's cache; so only fsync of a file or a directory is a barrier."""

    name = "fuse"
    sync_all_persists = False


class Ext4Ordered(Model):
    name = "ext4"

    def _persist_at(self) -> list[int]:
        out = [NEVER] * len(self.ops)
        next_sync: dict[InodeId, int] = {}
        next_commit = next_all = NEVER
        after_writeback: dict[InodeId, int] = {}  # the commit after the next writeback
        for j in range(len(self.ops) - 1, -1, -1):
            op = self.ops[j]
            if isinstance(op, SyncAll):
                next_commit = next_all = j
            elif isinstance(op, Fsync):
                next_commit = j
                next_sync[op.ino] = j
            elif isinstance(op, Writeback):
                after_writeback[op.ino] = next_commit
            elif isinstance(op, Write):
                out[j] = min(next_sync.get(op.ino, NEVER), after_writeback.get(op.ino, NEVER),
                             next_all)
            elif _is_mutation(op):
                out[j] = next_commit
        # auto_da_alloc: a rename over an existing file flushes the data first
        for r, op in enumerate(self.ops):
            if isinstance(op, Rename) and op.replaced is not None:
                for j in range(r):
                    w = self.ops[j]
                    if isinstance(w, Write) and w.ino == op.ino:
                        out[j] = min(out[j], out[r])
        return out

    def close(self, survivors: frozenset[int], crash: int) -> frozenset[int]:
        extra = set(survivors)
        for r in survivors:
            op = self.ops[r]
            if isinstance(op, Rename) and op.replaced is not None:
                for j in self.issued(r):
                    w = self.ops[j]
                    if isinstance(w, Write) and w.ino == op.ino:
                        extra.add(j)
        return frozenset(j for j in extra if j < crash and self.persist_at[j] >= crash)

    def variants(self, crash: int) -> Iterator[tuple[frozenset[int], Torn | None, str]]:
        unp = self.unpersisted(crash)
        meta = [j for j in unp if not isinstance(self.ops[j], Write)]
        data = [j for j in unp if isinstance(self.ops[j], Write)]
        everything = frozenset(unp)
        for n in range(len(meta) + 1):
            kept = frozenset(meta[:n])
            yield kept, None, f"journal keeps {n} of {len(meta)}, unsynced data lost"
            if data:
                yield kept | frozenset(data), None, f"journal keeps {n}, unsynced data survives"
        for name, group in self.objects(data).items():
            for n in range(len(group)):
                yield (everything - set(group)) | frozenset(group[:n]), None, \
                    f"{name} keeps {n} write(s)"
        for ino, j in self.torn_candidates(data).items():
            yield everything, Torn(j, "prefix"), f"last write of {ino} torn"


MODELS: dict[str, type[Model]] = {"conservative": Conservative, "fuse": Fuse,
                                  "ext4": Ext4Ordered}


class Builder:
    """Builds the images of states in non-decreasing crash order, incrementally:
    a base image holds the persisted ops, each state is a copy plus its
    survivors. Falls back to a full replay when the model is not monotone or
    the crash order goes backwards."""

    def __init__(self, model: Model, snapshot: Path) -> None:
        self.model = model
        self.snapshot = snapshot
        self.fast = model.monotone()
        self.base = model.trace.image(snapshot)
        self.at = 0
        self.by_persist = sorted(
            (model.persist_at[j], j) for j in model.mutations if model.persist_at[j] < NEVER
        )
        self.next = 0  # index into by_persist of the first op not yet in the base

    def image(self, state: CrashState) -> Image:
        if not self.fast or state.crash < self.at:
            return self.model.image(state, self.snapshot)
        newly: list[int] = []
        while self.next < len(self.by_persist) and self.by_persist[self.next][0] < state.crash:
            newly.append(self.by_persist[self.next][1])
            self.next += 1
        ops = self.model.ops
        for j in sorted(newly):
            self.base.apply(ops[j])
        self.at = state.crash
        image = self.base.clone()
        for j in sorted(state.survivors):
            op = ops[j]
            if state.torn is not None and state.torn.op == j:
                assert isinstance(op, Write)
                image.apply(op, state.torn.data(op))
            else:
                image.apply(op)
        return image


def distinct(model: Model, states: Iterator[CrashState]) -> list[CrashState]:
    """Drop states whose key repeats an earlier one (same operations applied)."""
    seen: set[tuple[int, frozenset[int], Torn | None]] = set()
    out: list[CrashState] = []
    for state in states:
        k = model.key(state)
        if k not in seen:
            seen.add(k)
            out.append(state)
    return out


def select(model: Model, snapshot: Path, count: int | None, seed: int,
           ignore: Sequence[str] = ()) -> list[CrashState]:
    """Distinct crash states (by the digest of what is on disk, ``ignore`` globs
    left out): all of them when ``count`` is None, else ``count`` drawn with a
    fixed seed."""
    candidates = distinct(model, model.states())
    if count is not None:
        random.Random(seed).shuffle(candidates)
        candidates = candidates[: 4 * count]
    order = sorted(range(len(candidates)), key=lambda i: candidates[i].crash)
    builder = Builder(model, snapshot)
    digests = {i: builder.image(candidates[i]).digest(ignore) for i in order}
    picked: list[CrashState] = []
    seen: set[str] = set()
    for i, state in enumerate(candidates):
        if digests[i] in seen:
            continue
        seen.add(digests[i])
        picked.append(state)
        if count is not None and len(picked) >= count:
            break
    picked.sort(key=lambda s: s.crash)
    return picked


def state_id(state: CrashState) -> str:
    text = f"{state.crash}:{sorted(state.survivors)}:{state.torn}"
    return hashlib.sha1(text.encode()).hexdigest()[:10]
