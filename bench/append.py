"""§1 of the report: one durable append, gitwal against JSONL and SQLite."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gitwal.records.codec import encode

from . import probe
from .common import QUICK, fmt_ratio, met
from .fixtures import fsync_off
from .ops import GitwalAppend, JsonlAppend, SqliteAppend, record_for
from .section import (
    BLOCKS,
    Section,
    base_repo,
    fmt_counts,
    profile_calls,
    sample_interleaved,
    say,
    stat_row,
)
from .storage import Objects

APPENDS = 60 if QUICK else 200  # per contender
TARGET = 5.0  # gitwal append / JSONL append + fsync, medians (5 fsyncs against 1)


def bench_append(work: Path) -> Section:
    say(f"1/7 durable append ({APPENDS} appends per contender)")
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
    before, lsn0 = Objects.of(objects), gitwal.lsn
    stats = sample_interleaved(ops, APPENDS)
    grown = Objects.of(objects) - before
    appended = gitwal.lsn - lsn0
    with fsync_off():
        nofsync = sample_interleaved({"x": gitwal}, APPENDS // 2, blocks=1)["x"]

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
        ok = s.median <= TARGET * jsonl
        section.rows.append(stat_row(
            name, s, jsonl_stats, "n/a" if f is None else f"{f:.1f}",
            f"≤ {TARGET:g}x JSONL" if is_gitwal else "—", met(ok) if is_gitwal else "—",
        ))
        if is_gitwal:
            section.targets.append((f"§1 durable append ≤ {TARGET:g}x JSONL append + fsync",
                                    fmt_ratio(s.median / jsonl), ok))
    section.rows.append(stat_row(
        "diagnostic: gitwal append with libgit2 fsync off (not durable)", nofsync,
        jsonl_stats, "—", "—", "—"))
    section.notes.append(
        f"Where an append spends its own time (cProfile, {APPENDS // 2} appends, per append, "
        "top 8 by self time; profiling inflates Python-heavy parts): "
        + profile_calls(gitwal, APPENDS // 2) + ".")
    section.notes.append(
        f"The {appended} timed appends grew .git/objects by {grown.use.allocated / appended:,.0f} "
        f"allocated bytes per append and left {grown.packs:+d} pack files and "
        f"{grown.loose:+d} loose objects (gitwal merges its small kept packs now and then).")
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
