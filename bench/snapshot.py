"""§3 of the report: the whole-tree snapshot `exec` takes, gitwal against
`git status` and a shadow repository."""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitwal.worktree.tree import Worktree

from .common import QUICK, fmt_ratio, fmt_spread, fmt_time, met, run_quiet, sh, timed
from .fixtures import file_body, generate_tree, init_repo
from .section import Section, sample_interleaved, say

TREE_SIZES = (1_000, 5_000) if QUICK else (1_000, 10_000, 50_000)
TREE_REPS = {1_000: 15, 5_000: 5, 10_000: 9, 50_000: 7}
TOUCHED_FILES = 5  # files an "agent step" changed before the snapshots are timed


class TreeCase:
    """A generated repo "after an agent step", a warm shadow repo and a warm scratch index."""

    DURABLE = ("-c", "core.fsync=loose-object", "-c", "core.fsyncMethod=batch")

    def __init__(self, work: Path, n: int) -> None:
        self.root = work / f"tree-{n}"
        self.shadow = work / f"shadow-{n}.git"
        t0 = time.perf_counter()
        self.paths = generate_tree(self.root, n)
        init_repo(self.root)
        self.made = time.perf_counter() - t0
        for i in range(TOUCHED_FILES):
            p = self.root / self.paths[(i * 7919) % n]
            p.write_bytes(p.read_bytes() + b"# touched by the agent\n")
        (self.root / "NEW_BY_AGENT.txt").write_bytes(b"untracked output\n")
        sh("git", "init", "-q", "--bare", str(self.shadow))
        self.wt = Worktree(pygit2.Repository(str(self.root)))
        self.first_snapshot = timed(lambda: self.wt.snapshot("bench"))
        self.first_shadow = timed(self.shadow_commit)
        self.git_status()
        self.edits = 0

    def touch(self) -> None:
        """Modify one more file (before every timed call)."""
        self.edits += 1
        k = self.edits
        path = self.root / self.paths[(k * 104729) % len(self.paths)]
        path.write_bytes(file_body(k) + b"# edited\n")

    def git_status(self) -> None:
        run_quiet(["git", "status", "--porcelain"], self.root)

    def shadow_commit(self, *cfg: str) -> None:
        git = ["git", f"--git-dir={self.shadow}", "--work-tree=.", *cfg]
        run_quiet([*git, "add", "-A"], self.root)
        run_quiet([*git, "commit", "-q", "-m", "x"], self.root)

    def shadow_commit_durable(self) -> None:
        self.shadow_commit(*self.DURABLE)

    def remove(self) -> None:
        shutil.rmtree(self.root)
        shutil.rmtree(self.shadow)


def bench_snapshot(work: Path) -> Section:
    section = Section(
        "3. Whole-tree snapshot for `exec`",
        "generated repos of small (~200-byte) files, 50 per directory, 3 levels deep, "
        f"committed; then {TOUCHED_FILES} files modified and one untracked file added, "
        "like an agent step. All contenders warm (gitwal's scratch index built, shadow "
        "repository initialised and committed once, `git status` run once). Before "
        "every timed call one more file is modified (not timed), for every contender "
        "alike; contenders interleaved in blocks; subprocess wall time; spread p10 .. p90. "
        "Shadow = `git --git-dir=<shadow> --work-tree=. add -A && git --git-dir=<shadow> "
        "--work-tree=. commit -q -m x`, with git's default fsync settings (loose objects "
        "not fsynced) and, as a diagnostic, with gitwal's (`core.fsync=loose-object`, "
        "`core.fsyncMethod=batch`).",
        ["files", "contender", "n", "median", "p10 .. p90", "ratio to git status",
         "ratio to shadow", "target", "met"],
    )
    largest = TREE_SIZES[-1]
    for n in TREE_SIZES:
        say(f"3/6 snapshot: {n} files")
        case = TreeCase(work, n)
        ops: dict[str, Callable[[], object]] = {
            "`git status --porcelain`": case.git_status,
            "shadow repo (`add -A` + `commit`)": case.shadow_commit,
            "shadow repo, fsync like gitwal (diagnostic)": case.shadow_commit_durable,
            "gitwal `Worktree.snapshot()`": functools.partial(case.wt.snapshot, "bench"),
        }
        reps = TREE_REPS[n]
        stats = sample_interleaved(ops, reps, blocks=reps, prepare=case.touch)
        status = stats["`git status --porcelain`"].median
        shadow_med = stats["shadow repo (`add -A` + `commit`)"].median
        for name, s in stats.items():
            target, verdict = "—", "—"
            if name.startswith("gitwal"):
                faster = s.median < shadow_med
                goals = [("< shadow", faster)]
                section.targets.append((f"snapshot faster than shadow repo ({n:,} files)",
                                        fmt_ratio(s.median / shadow_med), faster))
                if n == largest:
                    close = s.median <= 1.5 * status
                    goals.insert(0, ("≤ 1.5x git status", close))
                    section.targets.append((f"snapshot ≤ 1.5x `git status` ({n:,} files)",
                                            fmt_ratio(s.median / status), close))
                target = "; ".join(g for g, _ in goals)
                verdict = " / ".join(met(ok) for _, ok in goals)
            section.rows.append([f"{n:,}", name, str(s.n), fmt_time(s.median), fmt_spread(s),
                                 fmt_ratio(s.median / status), fmt_ratio(s.median / shadow_med),
                                 target, verdict])
        section.notes.append(
            f"{n:,} files: generating and committing the repo took {case.made:.1f} s; the "
            "first (cold) gitwal snapshot, which builds the scratch index, took "
            f"{fmt_time(case.first_snapshot)}; the first shadow commit "
            f"{fmt_time(case.first_shadow)}.")
        case.remove()
    if largest != 50_000:
        section.notes.append(
            f"Quick run: the ≤ 1.5x `git status` target is judged at {largest:,} files, "
            "not 50,000.")
    return section
