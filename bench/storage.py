"""§5 of the report: what a run costs on disk, loose and after `git gc`.

§2 and §4 build the runs and hand them over as ``StorageResult``s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .common import DiskUse, disk_use, fmt_ratio, sh
from .section import Section


@dataclass
class StorageCase:
    label: str
    root: Path
    records: int
    loose_before: DiskUse


@dataclass(frozen=True)
class StorageResult:
    case: StorageCase
    loose: DiskUse
    pack: DiskUse


def gc_storage(case: StorageCase) -> StorageResult:
    """Measure a run's loose size, then `git gc` and measure its pack."""
    objects = case.root / ".git" / "objects"
    loose = disk_use(objects) - case.loose_before
    pack_before = disk_use(objects / "pack", r"\.(pack|idx)$")
    sh("git", "gc", "-q", "--prune=now", cwd=case.root)
    pack = disk_use(objects / "pack", r"\.(pack|idx)$") - pack_before
    return StorageResult(case, loose, pack)


def storage_section(results: list[StorageResult]) -> Section:
    section = Section(
        "5. Storage",
        "each repository's own commit was packed before its run began, so loose growth "
        "is the log alone (content blobs included); loose = files under .git/objects, "
        "apparent size (sum of file sizes) and allocated size (blocks, what `du` "
        "reports); packed = growth of .pack + .idx after `git gc -q --prune=now`.",
        ["run", "records", "loose objects/record", "loose bytes/record (apparent)",
         "loose bytes/record (allocated, du)", "packed bytes/record", "loose (du) : packed",
         "target", "met"],
    )
    for r in results:
        n = r.case.records
        section.rows.append([
            r.case.label, f"{n:,}", f"{r.loose.files / n:.2f}",
            f"{r.loose.apparent / n:,.0f}", f"{r.loose.allocated / n:,.0f}",
            f"{r.pack.apparent / n:,.0f}",
            fmt_ratio(r.loose.allocated / max(1, r.pack.apparent)), "—", "—"])
    return section
