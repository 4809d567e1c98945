"""§4 of the report: `git wal log` and `git wal recover` on a run as gitwal
writes it, grown to 100,000 records through gitwal's own writer."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gitwal import Wal
from gitwal.records.rows import log_rows

from .common import GIT_WAL, QUICK, Stats, fmt_spread, fmt_time, met, run_peak, sh
from .section import Section, base_repo, say
from .storage import Objects, StorageResult, measure

STAGES = (1_000, 5_000) if QUICK else (10_000, 100_000)  # records, as the run grows
REPS = 3 if QUICK else 5  # timed runs of each command at each stage
DURABLE_STEPS = 200 if QUICK else 1_000  # steps built with every fsync, for the rate
LOG_RATE_TARGET = 50_000  # records/s, at the longest run
PEAK_TARGET = 64 * 1024 * 1024  # bytes, at every length
RUN = "big"
COMMANDS = ("log --json", "recover --json")


def profile_read(root: Path) -> str:
    """Where an in-process `git wal log --json` spends its time."""
    wal = Wal(root)
    t0 = time.perf_counter()
    records = wal.run(RUN).store.raw_records()
    t1 = time.perf_counter()
    rows = log_rows(records)
    t2 = time.perf_counter()
    text = b"\n".join(r if isinstance(r, bytes) else json.dumps(r).encode() for r in rows)
    t3 = time.perf_counter()
    del text
    n = len(records)
    return (f"In-process at {n:,} records: `Store.raw_records()` (walk the chain, read "
            f"every record) {fmt_time(t1 - t0)} ({(t1 - t0) * 1e6 / n:.0f} µs/record), "
            f"`log_rows` {fmt_time(t2 - t1)}, JSON output {fmt_time(t3 - t2)}")


def grow(root: Path, steps: int, durable: int) -> dict[str, float]:
    """``steps`` more steps through gitwal's writer (bench/logbuild.py, a child process)."""
    out = subprocess.run([sys.executable, "-m", "bench.logbuild", str(root), RUN, str(steps),
                          str(durable)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent)
    if out.returncode != 0:
        raise RuntimeError(f"bench.logbuild failed:\n{out.stderr.strip()}")
    built: dict[str, float] = json.loads(out.stdout)
    return built


def rate(steps: float, seconds: float) -> str:
    """Appends per second (two appends per step)."""
    return f"{2 * steps / seconds:,.0f} appends/s" if seconds > 0 and steps else "—"


def bench_scale(work: Path, storage: list[StorageResult]) -> Section:
    section = Section(
        "4. Reading and recovery at scale",
        "one run grown through gitwal's own writer (bench/logbuild.py): a plan, then "
        "`write_file` steps as `Run.apply` writes them (pre- and post-image blobs with "
        "`Store.put_blob`, an intent append, a commit append: two `Store.append` calls of "
        "one record each, under the run lock), 20 files rewritten in turn; the working "
        "tree then holds the last committed contents, so recovery finds nothing open and "
        "no drift. The run is grown to each length in turn and measured there, nothing "
        "cached between bench runs. At each length one untimed `git wal log --json` "
        f"(which must print every record), then {REPS} timed runs of each command, "
        "interleaved: `git wal log --run big --json > /dev/null` and `git wal recover "
        "--run big --json > /dev/null` (read-only: nothing is open) as whole processes, "
        "wall time including interpreter start; peak memory = the child's own "
        "`ru_maxrss` from `wait4` (largest of its runs).",
        ["records", "command", "n", "median", "p10 .. p90", "records/s", "peak memory",
         "target", "met"],
    )
    root = base_repo(work / "scale-repo", {f"src/f{i:02d}.txt": f"src/f{i:02d}.txt base\n"
                                           .encode() for i in range(20)})
    objects = root / ".git" / "objects"
    before = Objects.of(objects)
    have = 1  # records in the run: the plan
    for stage in STAGES:
        steps = (stage - have + 1) // 2
        say(f"4/7 scale: growing the run to {have + 2 * steps:,} records")
        built = grow(root, steps, DURABLE_STEPS if have == 1 else 0)
        have = int(built["records"])
        seconds = built["durable_seconds"] + built["fast_seconds"]
        section.notes.append(
            f"Growing the run to {have:,} records took {seconds:.1f} s: "
            + (f"{built['durable_steps']:,.0f} steps with every fsync "
               f"({rate(built['durable_steps'], built['durable_seconds'])}, the durable "
               "rate), then " if built["durable_steps"] else "")
            + f"{built['fast_steps']:,.0f} steps with fsync switched off in the builder "
            f"only ({rate(built['fast_steps'], built['fast_seconds'])}; same files, packs "
            "and merges).")
        printed = sh("git", "wal", "log", "--run", RUN, "--json", cwd=root)
        if len(printed.splitlines()) != have:
            raise RuntimeError(f"bench: `git wal log` printed {len(printed.splitlines())} of "
                               f"{have} records")
        del printed
        say(f"   timing log and recover on {have:,} records")
        times: dict[str, list[float]] = {c: [] for c in COMMANDS}
        peaks: dict[str, int] = dict.fromkeys(COMMANDS, 0)
        for _ in range(REPS):
            for cmd in COMMANDS:
                secs, peak = run_peak([GIT_WAL, *cmd.split(), "--run", RUN], root)
                times[cmd].append(secs)
                peaks[cmd] = max(peaks[cmd], peak)
        last = stage == STAGES[-1]
        for cmd in COMMANDS:
            s = Stats.of(times[cmd])
            per_s = have / s.median
            mem_ok = peaks[cmd] <= PEAK_TARGET
            goals = [(f"peak ≤ {PEAK_TARGET >> 20} MB", mem_ok)]
            section.targets.append((f"§4 `git wal {cmd}` peak memory ≤ 64 MB ({have:,} records)",
                                    f"{peaks[cmd] / 2**20:.1f} MB", mem_ok))
            if cmd == "log --json" and last:
                ok = per_s >= LOG_RATE_TARGET
                goals.insert(0, (f"≥ {LOG_RATE_TARGET:,} records/s", ok))
                section.targets.append((
                    f"§4 `git wal log --json` ≥ {LOG_RATE_TARGET:,} records/s ({have:,} records)",
                    f"{per_s:,.0f}/s", ok))
            section.rows.append([
                f"{have:,}", f"`git wal {cmd}`", str(s.n), fmt_time(s.median), fmt_spread(s),
                f"{per_s:,.0f}", f"{peaks[cmd] / 2**20:.1f} MB",
                "; ".join(g for g, _ in goals), " / ".join(met(ok) for _, ok in goals)])
        if last:
            section.notes.append(profile_read(root) + ".")
        storage.append(measure(f"run of §4 at {have:,} records", root, have, before, gc=last))
    if QUICK:
        section.notes.append(f"Quick run: {STAGES[0]:,} and {STAGES[-1]:,} records, not "
                             "10,000 and 100,000.")
    return section
