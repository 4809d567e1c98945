"""§1 of the report: one durable append, gitwal against JSONL and SQLite."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitwal.ids import CommitId
from gitwal.log.packwrite import (
    BLOB,
    COMMIT,
    MODE_BLOB,
    TREE,
    RawObject,
    tree_data,
    write_kept_pack,
)
from gitwal.records.codec import encode

from . import probe
from .common import QUICK, Stats, disk_use, fmt_ratio, fmt_time, met
from .fixtures import fsync_off
from .ops import GitwalAppend, JsonlAppend, SqliteAppend, record_for
from .section import BLOCKS, Section, base_repo, fmt_counts, sample_interleaved, say, stat_row

APPENDS = 60 if QUICK else 200  # per contender


def append_phases(app: GitwalAppend) -> dict[str, float]:
    """One append, mirroring ``Store.append`` with a clock between its phases.

    Keep in step with gitwal/log/store.py; the total is cross-checked against the
    timed ``Store.append`` in the report.
    """
    store = app.store
    app.lsn += 1
    rec = record_for(app.run, app.lsn)
    marks = [time.perf_counter()]
    with store.locked():
        marks.append(time.perf_counter())
        blob = RawObject(BLOB, encode(rec))
        tree = RawObject(TREE, tree_data([(f"{rec.lsn:012d}.json", MODE_BLOB, blob.oid)]))
        commit = RawObject(COMMIT, store._commit_content(tree.oid, [app.head], b"bench\n"))
        marks.append(time.perf_counter())
        write_kept_pack(store._common / "objects", [blob, tree, commit])
        marks.append(time.perf_counter())
        store._move_ref(pygit2.Oid(hex=commit.oid), app.head)
        marks.append(time.perf_counter())
    app.head = CommitId(commit.oid)
    names = ["take run lock", "encode record, tree, commit (in memory)",
             "kept pack: .keep, .pack + fsync, .idx + fsync, fsync objects/pack/",
             "ref: lock file, fsync, rename, fsync refs/wal/"]
    return {n: marks[i + 1] - marks[i] for i, n in enumerate(names)}


def bench_append(work: Path) -> Section:
    say(f"1/6 durable append ({APPENDS} appends per contender)")
    repo_root = base_repo(work / "append-repo", {"README": b"append benchmark\n"})
    gitwal = GitwalAppend(repo_root)
    ops: dict[str, Callable[[], object]] = {
        "JSONL `log_append` (open, write, flush, fsync)": JsonlAppend(work / "append-jsonl"),
        "SQLite WAL, `synchronous=FULL`, 1 INSERT/transaction":
            SqliteAppend(work / "append-sqlite"),
        "gitwal `Store.append` (1 record, under the run lock)": gitwal,
    }
    for op in ops.values():  # warm-up: files, caches, sqlite's WAL file
        for _ in range(10):
            op()
    objects = repo_root / ".git" / "objects"
    before, lsn0 = disk_use(objects), gitwal.lsn
    stats = sample_interleaved(ops, APPENDS)
    grown = disk_use(objects) - before
    appended = gitwal.lsn - lsn0
    with fsync_off():
        nofsync = sample_interleaved({"x": gitwal}, APPENDS // 2, blocks=1)["x"]
    phase_samples: dict[str, list[float]] = {}
    for _ in range(APPENDS // 2):
        for name, secs in append_phases(gitwal).items():
            phase_samples.setdefault(name, []).append(secs)

    fsyncs: dict[str, float | None] = dict.fromkeys(ops)
    syscalls: dict[str, float] = {}
    by_path: dict[str, float] = {}
    if probe.strace_available():
        say("   strace: fsyncs per append")
        kinds = dict(zip(ops, ["jsonl-append", "sqlite-append", "gitwal-append"], strict=True))
        setup = lambda r: base_repo(r, {"README": b"x\n"})  # noqa: E731
        for name, kind in kinds.items():
            counts = probe.per_op(setup if kind.startswith("gitwal") else None, kind, work, 50)
            fsyncs[name] = sum(counts.values())
        syscalls = probe.per_op(setup, "gitwal-append", work, 50, trace=None)
        by_path = probe.per_op(setup, "gitwal-append", work, 50, trace=probe.BY_PATH)

    jsonl_stats = stats[next(iter(ops))]
    jsonl = jsonl_stats.median
    section = Section(
        "1. Durable append: one record",
        "each contender appends the same JSON record "
        f"({len(encode(record_for(gitwal.run, 2)))} bytes) in-process, LSNs consecutive; "
        f"{APPENDS} appends each after 10 warm-up appends, interleaved in {BLOCKS} blocks; "
        "wall time per append (`time.perf_counter`); spread is p10 .. p90; "
        "fsyncs/op = (fsync + fdatasync calls of a 50-append process minus those of a "
        "0-append process) / 50, counted with `strace -f -c`.",
        ["contender", "n", "median", "p10 .. p90", "ratio to JSONL (medians)",
         "ratio to JSONL (p10s)", "fsyncs/op", "target", "met"],
    )
    for name, s in stats.items():
        f = fsyncs[name]
        is_gitwal = name.startswith("gitwal")
        ok = s.median <= 4 * jsonl
        section.rows.append(stat_row(
            name, s, jsonl_stats, "n/a" if f is None else f"{f:.1f}",
            "≤ 4x JSONL" if is_gitwal else "—", met(ok) if is_gitwal else "—",
        ))
        if is_gitwal:
            section.targets.append(("durable append ≤ 4x JSONL",
                                    fmt_ratio(s.median / jsonl), ok))
    section.rows.append(stat_row(
        "diagnostic: gitwal append with libgit2 fsync off (not durable)", nofsync,
        jsonl_stats, "—", "—", "—"))
    phases = {k: Stats.of(v) for k, v in phase_samples.items()}
    total = sum(p.median for p in phases.values())
    breakdown = ", ".join(f"{k} {fmt_time(p.median)}" for k, p in phases.items())
    section.notes.append(
        f"Where an append's time goes (medians of {APPENDS // 2} appends re-timed phase by "
        f"phase; sum {fmt_time(total)}): {breakdown}.")
    section.notes.append(
        f"Each append wrote {grown.files / appended:.1f} loose objects "
        f"({grown.allocated / appended / 1024:.1f} KiB allocated on disk) "
        "plus the ref file.")
    if syscalls:
        section.notes.append(
            "fsyncs per gitwal append, by what they sync (`strace -y`): "
            + fmt_counts(by_path) + ".")
        top = dict(sorted(syscalls.items(), key=lambda kv: -kv[1])[:10])
        section.notes.append(
            f"Syscalls per gitwal append: {sum(syscalls.values()):.0f} in total; most "
            "frequent: " + fmt_counts(top) + ".")
    else:
        section.notes.append("strace is not installed: fsync counts were skipped.")
    return section
