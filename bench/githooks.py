"""§9 of the report: what gitwal's git hooks cost the git commands a person
runs. git runs the `reference-transaction` hook two or three times for every
ref update (a branch, each commit of a rebase); gitwal's stays in pure shell
unless a `refs/wal/*` ref is in the transaction, so its floor is a hook that
only exits 0."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable
from pathlib import Path

from .common import GIT_WAL, QUICK, fmt_ratio, met, sh
from .section import Section, base_repo, sample_interleaved, say, stat_row

PAIRS = 50 if QUICK else 200  # `git branch` + `git branch -D` pairs per sample
SAMPLES = 5 if QUICK else 10  # samples per contender, interleaved
TARGET = 1.3  # gitwal's hooks / a hook that only exits 0

LOOP = 'i=0; while [ $i -lt {n} ]; do git branch b$i && git branch -D b$i >/dev/null; ' \
       'i=$((i+1)); done'


def _repo(root: Path, hook: str | None) -> Path:
    repo = base_repo(root, {"README": b"hello\n"})
    if hook == "exit0":
        path = repo / ".git" / "hooks" / "reference-transaction"
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    elif hook == "gitwal":
        sh(GIT_WAL, "hooks", "install", cwd=repo)
    return repo


def bench_githooks(work: Path) -> Section:
    say(f"§9 git hooks: {PAIRS} branch pairs x {SAMPLES}")
    repos = {name: _repo(work / f"hooks-{name}", None if name == "none" else name)
             for name in ("none", "exit0", "gitwal")}

    def loop(repo: Path) -> None:
        subprocess.run(["sh", "-c", LOOP.format(n=PAIRS)], cwd=repo, check=True,
                       capture_output=True)

    ops: dict[str, Callable[[], object]] = {
        name: functools.partial(loop, repo) for name, repo in repos.items()}
    stats = sample_interleaved(ops, SAMPLES)
    floor = stats["exit0"]
    ratio = stats["gitwal"].median / floor.median
    labels = {"none": "no reference-transaction hook",
              "exit0": "a reference-transaction hook that only exits 0 (the floor)",
              "gitwal": "gitwal's hooks (`git wal hooks install`)"}
    rows = [stat_row(labels[name], stats[name], floor,
                     f"≤ {TARGET}x the exit-0 hook" if name == "gitwal" else "—",
                     met(ratio <= TARGET) if name == "gitwal" else "—")
            for name in ("none", "exit0", "gitwal")]
    return Section(
        title=f"9. git hooks: {PAIRS} `git branch` + `git branch -D` pairs",
        how=(f"one sample is a `sh` loop of {PAIRS} `git branch bN` + `git branch -D bN` "
             f"pairs in a repository with one commit, timed whole; {SAMPLES} samples per "
             "contender, interleaved; each contender has its own repository (no hook; "
             "`.git/hooks/reference-transaction` that only exits 0; gitwal's pre-commit "
             "and reference-transaction hooks installed by `git wal hooks install`); no "
             "`refs/wal/*` ref is involved, so gitwal's hook does nothing but read its "
             "input in shell."),
        header=["contender", "n", "median", "p10 .. p90", "ratio to exit-0 hook (medians)",
                "ratio (p10s)", "target", "met"],
        rows=rows,
        targets=[(f"§9 {PAIRS} branch pairs, gitwal's hooks ≤ {TARGET}x an exit-0 hook",
                  fmt_ratio(ratio), ratio <= TARGET)],
    )


__all__ = ["bench_githooks"]
