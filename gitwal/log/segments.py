"""Reading a run's log for `git wal verify`: every segment, past the first problem.

The Store refuses a log at its first defect, which is right for recovery
(nothing is repaired from an untrusted log). The verifier's job is the
opposite: name every defect it can, with its LSN. So it walks the chains
itself and turns each violation of docs/format.md into a :class:`Failure`
instead of an exception, keeping whatever it could read for the later checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pygit2
from pygit2.enums import ObjectType

from ..base.errors import CorruptLog
from ..records.codec import decode, encode
from ..records.model import Checkpoint, Plan, Record, type_name

RECORD_NAME = re.compile(r"(\d{12})\.json")
OBJ_NAME = re.compile(r"obj-([0-9a-f]{40}(?:[0-9a-f]{24})?)")
GITWAL_IDENT = ("gitwal", "gitwal@localhost")
_MODE_KIND = {pygit2.GIT_FILEMODE_BLOB: ObjectType.BLOB, pygit2.GIT_FILEMODE_TREE: ObjectType.TREE}


@dataclass(frozen=True)
class Failure:
    """One thing that does not hold: which run, which check, which LSN (if any), why."""

    run: str
    check: str
    reason: str
    lsn: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"lsn": self.lsn, "check": self.check, "reason": self.reason}


@dataclass(frozen=True)
class Entry:
    """A record as stored: decoded, its bytes, and the append commit carrying it."""

    record: Record
    raw: bytes
    commit: str


@dataclass(frozen=True)
class Append:
    """One append commit. Signature and seal checks will want ``commit`` itself."""

    oid: str
    commit: pygit2.Commit
    entries: tuple[Entry, ...]
    objects: frozenset[str]  # ids its obj-<oid> entries keep alive (present, right type)


@dataclass(frozen=True)
class Segment:
    """A chain of appends under one ref: the live log or an archived segment."""

    ref: str
    head: str
    appends: tuple[Append, ...]  # root first

    @property
    def entries(self) -> list[Entry]:
        return [e for a in self.appends for e in a.entries]


def object_kind(repo: pygit2.Repository, oid: str) -> ObjectType | None:
    """The object's type without reading its content (None: not in the repository)."""
    try:
        kind, _size = repo.odb.read_header(oid)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    return ObjectType(kind)


class _Reader:
    """Collects the failures of one segment while reading it."""

    def __init__(self, repo: pygit2.Repository, run: str, label: str) -> None:
        self.repo = repo
        self.run = run
        self.label = label  # "" for the live log, else "archive <ref>: "
        self.failures: list[Failure] = []

    def fail(self, reason: str, lsn: int | None = None) -> None:
        self.failures.append(Failure(self.run, "chain", self.label + reason, lsn))

    def append(self, commit: pygit2.Commit) -> tuple[Append, list[int]]:
        """Read one append commit; also returns LSNs whose blob exists but is unreadable."""
        short = str(commit.id)[:12]
        for role, sig in (("author", commit.author), ("committer", commit.committer)):
            if (sig.name, sig.email) != GITWAL_IDENT:
                self.fail(f"append {short}: {role} is {sig.name} <{sig.email}>, "
                          "not gitwal <gitwal@localhost>")
        try:
            tree = commit.tree
        except (KeyError, pygit2.GitError):
            self.fail(f"append {short}: its tree is missing")
            return Append(str(commit.id), commit, (), frozenset()), []
        entries: list[Entry] = []
        broken: list[int] = []
        objects: set[str] = set()
        for item in tree:
            name = item.name or ""
            if m := RECORD_NAME.fullmatch(name):
                entry = self._record(commit, item, int(m.group(1)))
                if entry is None:
                    broken.append(int(m.group(1)))
                else:
                    entries.append(entry)
            elif m := OBJ_NAME.fullmatch(name):
                if self._kept_object(short, item, m.group(1)):
                    objects.add(m.group(1))
            else:
                self.fail(f"append {short}: unexpected tree entry {name!r} (only record "
                          "blobs and obj-<oid> entries belong in an append)")
        if not entries and not broken:
            self.fail(f"append {short} holds no record")
        return Append(str(commit.id), commit, tuple(entries), frozenset(objects)), broken

    def _record(self, commit: pygit2.Commit, item: pygit2.Object, lsn: int) -> Entry | None:
        where = f"record {item.name} in append {str(commit.id)[:12]}"
        if item.filemode != pygit2.GIT_FILEMODE_BLOB:
            self.fail(f"{where} has mode {item.filemode:o}, not 100644", lsn)
        blob = self.repo.get(item.id)
        if not isinstance(blob, pygit2.Blob):
            self.fail(f"{where} is missing or not a blob", lsn)
            return None
        data = blob.data
        try:
            rec = decode(data, where)
        except CorruptLog as e:
            self.fail(e.message, lsn)
            return None
        if rec.lsn != lsn:
            self.fail(f"{where} holds a record with LSN {rec.lsn}", lsn)
            return None
        if rec.run != self.run:
            self.fail(f"{where} belongs to run {rec.run!r}, not to this run", lsn)
            return None
        if encode(rec) != data:
            # gitwal writes one canonical encoding; other bytes mean another writer.
            self.fail(f"{where} is not in canonical form (edited outside gitwal?)", lsn)
        return Entry(rec, data, str(commit.id))

    def _kept_object(self, short: str, item: pygit2.Object, named: str) -> bool:
        name = item.name
        if str(item.id) != named:
            self.fail(f"append {short}: entry {name} holds object {item.id}, not {named}")
            return False
        want = _MODE_KIND.get(item.filemode)
        if want is None:
            self.fail(f"append {short}: entry {name} has mode {item.filemode:o} "
                      "(expected 100644 or 040000)")
            return False
        kind = object_kind(self.repo, named)
        if kind is None:
            self.fail(f"append {short}: object {named} (entry {name}) is missing "
                      "from the repository")
            return False
        if kind != want:
            self.fail(f"append {short}: entry {name} has mode {item.filemode:o} "
                      f"but the object is a {kind.name.lower()}")
            return False
        return True


def read_segment(repo: pygit2.Repository, run: str, ref: str, head: str,
                 live: bool) -> tuple[Segment, list[Failure]]:
    """Walk ``head`` back to its root; every defect becomes a failure, not an exception."""
    reader = _Reader(repo, run, "" if live else f"archive {ref}: ")
    newest_first: list[tuple[Append, list[int]]] = []
    oid: str | None = head
    while oid is not None:
        obj = repo.get(oid)
        if not isinstance(obj, pygit2.Commit):
            what = "is missing" if obj is None else f"is a {obj.type_str}, not a commit"
            reader.fail(f"append {oid[:12]} {what}: the chain below it is lost")
            break
        newest_first.append(reader.append(obj))
        parents = obj.parent_ids
        if len(parents) > 1:
            reader.fail(f"append {oid[:12]} has {len(parents)} parents (a chain is linear); "
                        "following the first")
        oid = str(parents[0]) if parents else None
    newest_first.reverse()
    appends = tuple(a for a, _ in newest_first)
    _check_sequence(reader, newest_first)
    return Segment(ref, head, appends), reader.failures


def _check_sequence(reader: _Reader, appends: list[tuple[Append, list[int]]]) -> None:
    """LSNs must go 1, 2, 3 ... (or c, c+1, ... from a checkpoint) with no gap or repeat."""
    seq: list[tuple[int, str, Record | None]] = []
    for a, broken in appends:
        for lsn in sorted([e.record.lsn for e in a.entries] + broken):
            rec = next((e.record for e in a.entries if e.record.lsn == lsn), None)
            seq.append((lsn, a.oid, rec))
    if not seq:
        return
    first_lsn, _, first = seq[0]
    if first is not None and not ((isinstance(first, Plan) and first_lsn == 1)
                                  or isinstance(first, Checkpoint)):
        reader.fail(f"the chain starts with a {type_name(first)} record at LSN {first_lsn}, "
                    "not with the plan (LSN 1) or a checkpoint", first_lsn)
    seen: dict[int, str] = {}
    announced: set[int] = set()  # LSNs already reported as coming later than they should
    prev = first_lsn - 1
    for i, (lsn, commit, _rec) in enumerate(seq):
        if lsn in seen:
            reader.fail(f"LSN {lsn} appears twice in the chain (appends {seen[lsn][:12]} "
                        f"and {commit[:12]})", lsn)
            continue
        seen[lsn] = commit
        want = prev + 1
        if lsn > want:
            later = {x for x, _, _ in seq[i + 1 :]}
            if want in later:
                reader.fail(f"appends out of order: LSN {lsn} (append {commit[:12]}) comes "
                            f"before LSN {want}, right after LSN {prev}", want)
                announced.update(x for x in range(want, lsn) if x in later)
            else:
                gap = str(want) if lsn == want + 1 else f"{want}..{lsn - 1}"
                reader.fail(f"LSN {gap} missing: LSN {lsn} follows LSN {prev} in the chain "
                            "(a record was dropped)", want)
        elif lsn < want and lsn not in announced:
            reader.fail(f"appends out of order: LSN {lsn} (append {commit[:12]}) comes "
                        f"after LSN {prev}", lsn)
        prev = max(prev, lsn)


def merge_segments(run: str, segments: list[Segment]) -> tuple[list[Entry], list[Failure]]:
    """The run's records by LSN over all segments; overlaps must agree byte for byte."""
    failures: list[Failure] = []
    by_lsn: dict[int, tuple[Entry, str]] = {}
    spans: list[tuple[int, int, str]] = []
    for seg in segments:
        here: set[int] = set()
        for e in seg.entries:
            lsn = e.record.lsn
            if lsn in here:
                continue  # a repeat inside one chain: the sequence check reported it
            here.add(lsn)
            other = by_lsn.get(lsn)
            if other is not None and other[0].raw != e.raw:
                failures.append(Failure(run, "chain", f"LSN {lsn} differs between {other[1]} "
                                        f"and {seg.ref} (the segments do not join)", lsn))
            by_lsn[lsn] = (e, seg.ref)  # later segments (the live one last) win
        if here:
            spans.append((min(here), max(here), seg.ref))
    spans.sort()
    for lo, _hi, ref in spans:
        earlier = [s for s in spans if s[0] < lo]
        if earlier and not any(a <= lo <= b for a, b, _ in earlier):
            end = max(b for _, b, _ in earlier)
            failures.append(Failure(run, "chain", f"{ref} starts at LSN {lo}, which no earlier "
                                    f"segment holds (they end at LSN {end}): the segments do "
                                    "not join", lo))
    return [by_lsn[k][0] for k in sorted(by_lsn)], failures
