"""§3 of the report: the whole command `git wal exec -- true` on a large tree,
against `git status`, both as whole processes."""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitwal.worktree.tree import Worktree

from .common import GIT_WAL, QUICK, fmt_ratio, fmt_spread, fmt_time, met, run_quiet, sh, timed
from .fixtures import file_body, generate_tree, init_repo
from .section import Section, sample_interleaved, say

FILES = 5_000 if QUICK else 50_000
CHANGED = 500  # files rewritten before every timed call, second case
REPS = 5 if QUICK else 9  # timed calls per contender and case
TARGET = 1.5  # exec / git status, medians, in each case
RUN = "bench-exec"


class TreeCase:
    """A generated, committed repository with a run begun, every contender warm."""

    def __init__(self, work: Path, n: int) -> None:
        self.root = work / f"tree-{n}"
        t0 = time.perf_counter()
        self.paths = generate_tree(self.root, n)
        init_repo(self.root)
        self.made = time.perf_counter() - t0
        sh(GIT_WAL, "begin", "--task", "exec benchmark", "--run", RUN, cwd=self.root)
        self.first_exec = timed(self.git_wal_exec)  # builds the run's scratch index
        self.git_status()
        self.wt = Worktree(pygit2.Repository(str(self.root)))
        self.round = 0

    def git_status(self) -> None:
        run_quiet(["git", "status"], self.root)

    def git_wal_exec(self) -> None:
        run_quiet([GIT_WAL, "exec", "--", "true"], self.root)

    def in_process_snapshot(self) -> None:
        self.wt.snapshot(RUN)

    def change(self, count: int) -> None:
        """Rewrite the same ``count`` files with new content (before every timed call)."""
        self.round += 1
        for i in range(count):
            path = self.root / self.paths[(i * 97) % len(self.paths)]
            path.write_bytes(file_body(i) + f"# round {self.round}\n".encode())

    def remove(self) -> None:
        shutil.rmtree(self.root)


def bench_snapshot(work: Path) -> Section:
    section = Section(
        "3. Whole command: `git wal exec -- true` on a large tree",
        f"a generated repository of {FILES:,} small (~200-byte) files, 50 per directory, 3 "
        "levels deep, committed, a run begun (`git wal begin`). Both contenders are whole "
        "processes with a warm cache: one untimed `git wal exec -- true` first (it builds "
        "the run's scratch index) and one untimed `git status`. Case *0 changed*: nothing "
        f"touched between calls. Case *{CHANGED} changed*: before every timed call (not "
        f"timed) the same {CHANGED:,} tracked files are rewritten with new content, so "
        f"`git status` sees {CHANGED:,} modified files and each `exec` snapshot as many "
        f"changed since the last one. {REPS} calls per contender and case, interleaved; "
        "`subprocess.run` wall time, output discarded; spread p10 .. p90. Each `exec` "
        "appends an intent and a commit (two snapshots of the whole tree around `true`). "
        "Diagnostic row: the snapshot alone, in-process (`Worktree.snapshot()`, the same "
        "run's scratch index).",
        ["files", "changed", "contender", "n", "median", "p10 .. p90", "ratio to git status",
         "target", "met"],
    )
    say(f"3/7 whole command: exec on {FILES:,} files")
    case = TreeCase(work, FILES)
    ops: dict[str, Callable[[], object]] = {
        "`git status`": case.git_status,
        "`git wal exec -- true`": case.git_wal_exec,
        "diagnostic: `Worktree.snapshot()` in-process": case.in_process_snapshot,
    }
    for changed in (0, CHANGED):
        prepare = functools.partial(case.change, changed) if changed else None
        stats = sample_interleaved(ops, REPS, blocks=REPS, prepare=prepare)
        status = stats["`git status`"].median
        for name, s in stats.items():
            ratio = s.median / status
            target, verdict = "—", "—"
            if name.startswith("`git wal exec"):
                ok = ratio <= TARGET
                target, verdict = f"≤ {TARGET}x git status", met(ok)
                section.targets.append((
                    f"§3 `git wal exec -- true` ≤ {TARGET}x `git status` ({FILES:,} files, "
                    f"{changed:,} changed)", fmt_ratio(ratio), ok))
            section.rows.append([f"{FILES:,}", f"{changed:,}", name, str(s.n),
                                 fmt_time(s.median), fmt_spread(s), fmt_ratio(ratio),
                                 target, verdict])
    section.notes.append(
        f"Generating and committing the repository took {case.made:.1f} s; the first "
        f"(cold) `git wal exec -- true`, which builds the scratch index, took "
        f"{fmt_time(case.first_exec)}.")
    if QUICK:
        section.notes.append(f"Quick run: {FILES:,} files, not 50,000.")
    case.remove()
    return section
