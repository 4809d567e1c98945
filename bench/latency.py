"""§6 of the report: `git wal status` and `git wal apply` as whole processes,
against `python3 -c 'import pygit2'` (the floor of any pygit2 tool)."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .common import BIN, GIT_WAL, QUICK, fmt_ratio, met, run_quiet
from .ops import STEP_PATH, GitwalStep, step_body
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
BASE = "`python3 -c 'import pygit2'`"
STATUS = "`git wal status`"
APPLY = "`git wal apply write-file src/step.txt --from new.txt`"
# gitwal command / python3 -c 'import pygit2', medians: a step as a whole
# process must cost little more than the interpreter and pygit2 loading.
TARGETS = {STATUS: 2.0, APPLY: 1.3}


class NewContent:
    """Before every timed call: new content in the file `git wal apply` reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.k = 0

    def __call__(self) -> None:
        self.k += 1
        self.path.write_bytes(step_body(self.k, "latency"))


def bench_latency(work: Path) -> Section:
    say(f"6/7 process latency ({LATENCY_RUNS} runs per command)")
    root = base_repo(work / "latency-repo", {STEP_PATH: b"initial\n", "README": b"x\n"})
    step = GitwalStep(root)
    for _ in range(10):
        step()
    python3 = str(BIN / "python3") if (BIN / "python3").exists() else sys.executable
    source = root.parent / "latency-new.txt"  # outside the tree: `git wal status` sees no drift
    cmds = {
        BASE: [python3, "-c", "import pygit2"],
        STATUS: [GIT_WAL, "status"],
        APPLY: [GIT_WAL, "apply", "write-file", STEP_PATH, "--from", str(source)],
        "`python3 -c pass`": [python3, "-c", "pass"],
        "`git status`": ["git", "status"],
        "diagnostic: `python3 -c 'import gitwal.cli'`": [python3, "-c", "import gitwal.cli"],
        NO_BYTECODE: [GIT_WAL, "status"],
    }
    # As this environment runs it: installed packages and the standard library read
    # their __pycache__, the editable gitwal (no __pycache__) is compiled at every start.
    # An empty PYTHONPYCACHEPREFIX counts as unset.
    no_cache = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": ""}
    envs = {name: no_cache if name == NO_BYTECODE else None for name in cmds}
    prepare = NewContent(source)
    for name, argv in cmds.items():
        prepare()
        run_quiet(argv, root, envs[name])
    ops: dict[str, Callable[[], object]] = {
        name: functools.partial(run_quiet, argv, root, envs[name])
        for name, argv in cmds.items()
    }
    stats = sample_interleaved(ops, LATENCY_RUNS, blocks=LATENCY_RUNS, prepare=prepare)
    base = stats[BASE]
    section = Section(
        "6. Process latency",
        f"a small repository with a run of {len(step.run.records())} records (current run); "
        f"each command run {LATENCY_RUNS} times, interleaved, after one untimed run; "
        "`subprocess.run` wall time (`time.perf_counter`), output discarded; "
        "spread p10 .. p90. `git wal apply` writes new content (put in the source file "
        "before every call of every command, not timed) into a tracked file: a whole "
        "logged step. `python3` is the venv's interpreter, the one `git wal` runs on; "
        "Python bytecode is cached (in the temp dir) except in the row that says not.",
        ["command", "n", "median", "p10 .. p90", "ratio to `import pygit2` (medians)",
         "ratio to `import pygit2` (p10s)", "ratio to `git status` (medians)",
         "target", "met"],
    )
    git = stats["`git status`"].median
    for name, s in stats.items():
        target, verdict = "—", "—"
        if name in TARGETS:
            limit = TARGETS[name]
            ok = s.median <= limit * base.median
            target, verdict = f"≤ {limit:g}x `import pygit2`", met(ok)
            section.targets.append((f"§6 {name} ≤ {limit:g}x {BASE}",
                                    fmt_ratio(s.median / base.median), ok))
        section.rows.append(stat_row(name, s, base, fmt_ratio(s.median / git), target,
                                     verdict))
    section.notes.append("Import time of `git wal` by top-level package (`python3 -X "
                         "importtime -c 'import gitwal.cli'`, one run, self times summed): "
                         + import_costs() + ".")
    return section
