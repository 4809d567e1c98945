"""§6 of the report: start-up latency of `git wal` against `python3` and
`git status`."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .common import BIN, QUICK, fmt_ratio, run_quiet
from .ops import STEP_PATH, GitwalStep
from .section import Section, base_repo, sample_interleaved, say, stat_row

LATENCY_RUNS = 10 if QUICK else 20  # runs per command


def import_costs() -> str:
    """Import time of `git wal` by top-level package (``python -X importtime``, self times)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import gitwal.cli"],
                          capture_output=True, text=True)
    by_package: dict[str, int] = {}
    total = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own, _cumulative, name = line.removeprefix("import time:").split("|", 2)
        if not own.strip().isdigit():
            continue  # the header line
        package = name.strip().split(".")[0]
        by_package[package] = by_package.get(package, 0) + int(own)
        total += int(own)
    top = sorted(by_package.items(), key=lambda kv: -kv[1])[:6]
    return (f"{total / 1000:.0f} ms in all; " +
            ", ".join(f"`{name}` {us / 1000:.1f} ms" for name, us in top))


NO_BYTECODE = ("diagnostic: `git wal status` with `PYTHONDONTWRITEBYTECODE=1` (editable "
               "gitwal compiled at every start)")


def bench_latency(work: Path) -> Section:
    say(f"6/6 process latency ({LATENCY_RUNS} runs per command)")
    root = base_repo(work / "latency-repo", {STEP_PATH: b"initial\n", "README": b"x\n"})
    step = GitwalStep(root)
    for _ in range(10):
        step()
    python3 = str(BIN / "python3") if (BIN / "python3").exists() else sys.executable
    cmds = {
        "`python3 -c pass`": [python3, "-c", "pass"],
        "`git status`": ["git", "status"],
        "`git wal status`": ["git", "wal", "status"],
        "diagnostic: `python3 -c 'import gitwal.cli'`": [python3, "-c", "import gitwal.cli"],
        NO_BYTECODE: ["git", "wal", "status"],
    }
    # As this environment runs it: installed packages and the standard library read
    # their __pycache__, the editable gitwal (no __pycache__) is compiled at every start.
    # An empty PYTHONPYCACHEPREFIX counts as unset.
    no_cache = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": ""}
    envs = {name: no_cache if name == NO_BYTECODE else None for name in cmds}
    for name, argv in cmds.items():
        run_quiet(argv, root, envs[name])
    ops: dict[str, Callable[[], object]] = {
        name: functools.partial(run_quiet, argv, root, envs[name])
        for name, argv in cmds.items()
    }
    stats = sample_interleaved(ops, LATENCY_RUNS, blocks=LATENCY_RUNS)
    git = stats["`git status`"].median
    section = Section(
        "6. Process latency",
        f"a small repository with a run of {len(step.run.records())} records (current run); "
        f"each command run {LATENCY_RUNS} times, interleaved, after one untimed run; "
        "`subprocess.run` wall time (`time.perf_counter`), output discarded; "
        "spread p10 .. p90. `python3` is the venv's interpreter, the one `git wal` runs on; "
        "Python bytecode is cached (in the temp dir) except in the row that says not.",
        ["command", "n", "median", "p10 .. p90", "ratio to `python3 -c pass` (medians)",
         "ratio to `python3 -c pass` (p10s)", "ratio to `git status` (medians)",
         "target", "met"],
    )
    for name, s in stats.items():
        section.rows.append(stat_row(name, s, stats["`python3 -c pass`"],
                                     fmt_ratio(s.median / git), "—", "—"))
    section.notes.append("Import time of `git wal` by top-level package (`python3 -X "
                         "importtime -c 'import gitwal.cli'`, one run, self times summed): "
                         + import_costs() + ".")
    return section
