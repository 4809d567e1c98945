"""§4 of the report: `git wal log` and `git wal recover` on runs of up to
100,000 records."""

from __future__ import annotations

import functools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from gitwal import Wal
from gitwal.cli.inspect import log_rows

from .common import QUICK, disk_use, fmt_spread, fmt_time, met, run_quiet, sh
from .fixtures import build_run, build_run_packed
from .section import Section, base_repo, sample_interleaved, say
from .storage import StorageCase, StorageResult, gc_storage

# Runs: (records, built packed with fast-import instead of loose with libgit2).
RUN_SIZES = ((1_000, False), (5_000, True)) if QUICK else (
    (1_000, False), (10_000, False), (100_000, True))
RUN_REPS = {1_000: 7, 5_000: 3, 10_000: 5, 100_000: 3}
LOG_RATE_TARGET = 20_000  # records/s


def profile_read(root: Path, run: str) -> str:
    """Where an in-process `git wal log --json` spends its time."""
    wal = Wal(root)
    t0 = time.perf_counter()
    records = wal.run(run).store.raw_records()
    t1 = time.perf_counter()
    rows = log_rows(records)
    t2 = time.perf_counter()
    text = b"\n".join(r if isinstance(r, bytes) else json.dumps(r).encode() for r in rows)
    t3 = time.perf_counter()
    del text
    n = len(records)
    per = 1e6 / n
    return (f"In-process at {n:,} records: `Store.records()` (walk the chain, read and "
            f"decode every record) {fmt_time(t1 - t0)} ({(t1 - t0) * per:.0f} µs/record), "
            f"`log_rows` {fmt_time(t2 - t1)}, JSON output {fmt_time(t3 - t2)}")


def check_builders(work: Path) -> None:
    """Both run builders must give byte-identical `git wal log --json` output."""
    paths = [f"src/f{i:02d}.txt" for i in range(20)]
    outputs = []
    for name, build in (("loose", build_run), ("packed", build_run_packed)):
        root = base_repo(work / f"check-{name}", {p: f"{p} base\n".encode() for p in paths})
        build(root, "big", 50, paths)
        outputs.append(sh("git", "wal", "log", "--run", "big", "--json", cwd=root))
        shutil.rmtree(root)
    if outputs[0] != outputs[1] or len(outputs[0].splitlines()) != 101:
        raise RuntimeError("bench: the loose and fast-import run builders disagree")


def bench_scale(work: Path, storage: list[StorageResult]) -> Section:
    section = Section(
        "4. Reading and recovery at scale",
        "runs of a plan plus N/2 committed `write_file` steps (intent + commit: 7 objects "
        "per step, exactly what `Run.apply` writes) built straight into the object "
        "database following docs/format.md (bench/fixtures.py): *loose* runs with pygit2, "
        "libgit2 fsync off during the build only, the layout gitwal leaves; *gc* = the "
        "same run after `git gc`; *fast-import* runs streamed through `git fast-import` "
        "into one pack (100k records as loose objects take minutes to build, and `git gc "
        "--auto` would have packed them long before). Both builders are checked to give "
        "byte-identical `git wal log --json` output. Working tree at the last committed "
        "content, so recovery finds no open intent and no drift; no checkpoints (every read "
        "walks the whole chain). One untimed `git wal log --json` per run (which must "
        "print every record), then timed: `git wal log --run R --json "
        "> /dev/null` and `git wal recover --run R --json > /dev/null` as subprocesses "
        "(wall time, including interpreter start-up), interleaved; spread p10 .. p90.",
        ["records", "objects", "command", "n", "median", "p10 .. p90", "records/s",
         "target", "met"],
    )
    check_builders(work)
    paths = [f"src/f{i:02d}.txt" for i in range(20)]
    for n, packed in RUN_SIZES:
        say(f"4/6 scale: building a run of {n:,} records"
            + (" (fast-import)" if packed else " (loose)"))
        root = base_repo(work / f"run-{n}", {p: f"{p} base\n".encode() for p in paths})
        loose_before = disk_use(root / ".git" / "objects")
        build = build_run_packed if packed else build_run
        t0 = time.perf_counter()
        records = build(root, "big", n // 2, paths)
        built = time.perf_counter() - t0
        section.notes.append(
            f"Building the {records:,}-record run took {built:.1f} s "
            f"({built / records * 1e6:.0f} µs/record, "
            + ("`git fast-import`)." if packed else "libgit2, fsync off)."))
        for state in ["fast-import"] if packed else ["loose", "gc"]:
            if state == "gc":
                storage.append(gc_storage(StorageCase(
                    f"run of {records:,} records (§4, ~30-byte files)", root, records,
                    loose_before)))
            say(f"   timing log and recover on {records:,} records ({state})")
            if state != "gc":  # the first read of each run: untimed, and checked
                printed = sh("git", "wal", "log", "--run", "big", "--json", cwd=root)
                if len(printed.splitlines()) != records:
                    raise RuntimeError(f"bench: log of the {n}-record run is incomplete")
            reps = RUN_REPS[n]
            cmds: dict[str, Callable[[], object]] = {
                name: functools.partial(run_quiet, ["git", "wal", *name.split(), "--run",
                                                    "big"], root)
                for name in ("log --json", "recover --json")
            }
            stats = sample_interleaved(cmds, reps, blocks=reps)
            for name, s in stats.items():
                rate = records / s.median
                target, verdict = "—", "—"
                if name == "log --json":
                    ok = rate >= LOG_RATE_TARGET
                    target, verdict = f"≥ {LOG_RATE_TARGET:,} records/s", met(ok)
                    section.targets.append((
                        f"`log --json` ≥ {LOG_RATE_TARGET:,} records/s "
                        f"({records:,} records, {state})", f"{rate:,.0f}/s", ok))
                section.rows.append([f"{records:,}", state, f"`git wal {name}`", str(s.n),
                                     fmt_time(s.median), fmt_spread(s), f"{rate:,.0f}",
                                     target, verdict])
        if n == RUN_SIZES[1][0]:
            section.notes.append(profile_read(root, "big") + ".")
        shutil.rmtree(root)
    if QUICK:
        section.notes.append("Quick run: 1k (loose, gc) and 5k (fast-import) records only.")
    return section
