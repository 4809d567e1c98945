"""§5 of the report: what a run costs on disk as gitwal leaves it, and after
`git gc` for comparison.

§4 grows the run (through gitwal's own writer, bench/logbuild.py) and hands
each stage over as a ``StorageResult``; the last one is also measured after
``git gc``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .common import DiskUse, disk_use, met, sh
from .section import Section

TARGET = 1024  # allocated bytes on disk per record, as gitwal leaves the run


@dataclass(frozen=True)
class Objects:
    """What is under .git/objects: sizes, pack files, loose objects."""

    use: DiskUse
    packs: int
    loose: int

    @classmethod
    def of(cls, objects: Path) -> Objects:
        packs = len(list((objects / "pack").glob("*.pack")))
        loose = sum(1 for d in objects.glob("[0-9a-f][0-9a-f]") for _ in d.iterdir())
        return cls(disk_use(objects), packs, loose)

    def __sub__(self, other: Objects) -> Objects:
        return Objects(self.use - other.use, self.packs - other.packs, self.loose - other.loose)


@dataclass(frozen=True)
class StorageResult:
    label: str
    records: int
    added: Objects  # what the run added under .git/objects, as gitwal left it
    after_gc: Objects | None = None  # the same after `git gc -q --prune=now`


def measure(label: str, root: Path, records: int, before: Objects,
            gc: bool = False) -> StorageResult:
    """What the run added under ``root``'s .git/objects since ``before``;
    with ``gc``, also after `git gc` (which changes the repository: measure last)."""
    objects = root / ".git" / "objects"
    added = Objects.of(objects) - before
    after = None
    if gc:
        sh("git", "gc", "-q", "--prune=now", cwd=root)
        after = Objects.of(objects) - before
    return StorageResult(label, records, added, after)


def storage_section(results: list[StorageResult]) -> Section:
    section = Section(
        "5. Storage",
        "the run of §4 as gitwal's writer left it (no `git gc`): the repository's own "
        "commit was packed before the run began, so what was added under .git/objects is "
        "the log alone (content blobs included). Allocated = blocks on disk (what `du` "
        "reports), apparent = sum of file sizes; pack files and loose objects counted "
        "as left. Last row: the same run after `git gc -q --prune=now`, for comparison.",
        ["run", "records", "allocated bytes/record (du)", "apparent bytes/record",
         "pack files added", "loose objects added", "target", "met"],
    )
    for r in results:
        for state, objs in (("as gitwal left it", r.added), ("after `git gc`", r.after_gc)):
            if objs is None:
                continue
            per = objs.use.allocated / r.records
            judged = objs is r.added and r.after_gc is not None  # the full-length run
            ok = per <= TARGET
            section.rows.append([
                f"{r.label}, {state}", f"{r.records:,}", f"{per:,.0f}",
                f"{objs.use.apparent / r.records:,.0f}", f"{objs.packs:,}", f"{objs.loose:,}",
                f"≤ {TARGET:,}" if judged else "—", met(ok) if judged else "—"])
            if judged:
                section.targets.append((
                    f"§5 storage ≤ 1 KB/record on disk, no gc ({r.records:,} records)",
                    f"{per:,.0f} bytes/record", ok))
    return section
