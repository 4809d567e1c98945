"""Checks of a tree that several runs changed at once (`make demo-agents`,
tests/test_many_agents.py): the order `git wal order --json` derives, applied
one step at a time to a copy of the base, and the lost-update rule.

Both read each step's changes from the log (gitwal.together.order.steps_of: per path,
the state before and after) and take the sequence from `git wal order --json`,
so what is checked is the command's own output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pygit2

from gitwal.base.ids import ABSENT
from gitwal.together.order import Step, steps_of

from .scripted_agent import GIT_WAL


def ordered_steps(repo: Path) -> tuple[dict[str, Any], list[Step]]:
    """`git wal order --json` (its report) and its steps, each with its changes."""
    proc = subprocess.run([GIT_WAL, "order", "--json"], cwd=repo, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise RuntimeError(f"git wal order --json exited {proc.returncode}: {proc.stderr}")
    report: dict[str, Any] = json.loads(proc.stdout)
    git = pygit2.Repository(str(repo))
    by_key = {s.key: s for run in report["runs"] for s in steps_of(git, run)}
    return report, [by_key[(s["run"], s["lsn"])] for s in report["steps"]]


def serial_replay(repo: Path, copy: Path, steps: list[Step]) -> None:
    """Apply ``steps`` one by one to ``copy`` (a copy of the base): each changed
    path gets the step's post-state blob from ``repo``'s object database."""
    git = pygit2.Repository(str(repo))
    for step in steps:
        for c in step.changes:
            target = copy / c.path
            if c.after == ABSENT:
                target.unlink(missing_ok=True)
                continue
            blob = git.get(c.after)
            assert isinstance(blob, pygit2.Blob), (step.key, c.path, c.after)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.data)


def state_of(repo: Path, rel: str) -> str:
    """The blob id the working tree's file would have (ABSENT when missing)."""
    path = repo / rel
    if not path.is_file():
        return ABSENT
    return str(pygit2.hash(path.read_bytes()))


def lost_updates(repo: Path, steps: list[Step]) -> list[str]:
    """Every committed post of every run is in the tree, or the next step on that
    path in the order (one that did not make the same change again) began from
    it; what is neither was lost (or forked)."""
    problems = []
    for i, step in enumerate(steps):
        for c in step.changes:
            # A later step that made the very same change (two shell steps'
            # snapshots both saw it) is not "the next step on the path": it
            # left the path as it found it, nothing of this one was lost.
            later = next((s for s in steps[i + 1:]
                          for d in s.changes if d.path == c.path and d.after != c.after),
                         None)
            if later is None:
                if state_of(repo, c.path) != c.after:
                    problems.append(f"{c.path}: run {step.run} LSN {step.lsn} left "
                                    f"{c.after[:12]}, the tree holds something else")
                continue
            before = next(d.before for d in later.changes if d.path == c.path)
            if before != c.after:
                problems.append(f"{c.path}: run {step.run} LSN {step.lsn} left "
                                f"{c.after[:12]}, the next step in the order (run "
                                f"{later.run} LSN {later.lsn}) began from {before[:12]}")
    return problems
