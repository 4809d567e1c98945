"""Applying, checking and undoing one step's effect on the working tree.

Shared by the live step protocol (run.py) and by recovery, so that a redo
after a crash writes exactly what the first attempt would have written.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pygit2

from . import tools
from .durable import crash_point
from .ids import ABSENT
from .overwrite import Kept, found, put, torn_prefix
from .records import Intent
from .worktree import Worktree

OUTPUT_TAIL = 4000  # characters of a failed check's output kept in the abort record


def _step_env(intent: Intent) -> dict[str, str]:
    env = dict(os.environ, GITWAL_RUN=intent.run, GITWAL_LSN=str(intent.lsn),
               GITWAL_KEY=intent.key)
    env.pop("GITWAL_CRASH_AT", None)  # a child is not part of the crash test
    return env


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    output: str


def run_check(command: str, wt: Worktree, intent: Intent, hold: int | None = None
              ) -> CheckResult:
    """Run a verification command in the tree; exit 0 means it passed.

    ``hold``: a lock fd the command inherits (Store.command_lock)."""
    proc = subprocess.run(
        command, shell=True, cwd=wt.root, env=_step_env(intent), capture_output=True,
        stdin=subprocess.DEVNULL, pass_fds=() if hold is None else (hold,),
    )
    out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return CheckResult(proc.returncode == 0, out[-OUTPUT_TAIL:])


def run_command(argv: Sequence[str], wt: Worktree, intent: Intent, hold: int) -> int:
    """Run an exec step's command with its idempotency key in the environment;
    it inherits ``hold``, the step's command lock (Store.command_lock)."""
    try:
        return subprocess.run(list(argv), cwd=wt.root, env=_step_env(intent),
                              pass_fds=(hold,)).returncode
    except FileNotFoundError:
        return 127
    except PermissionError:
        return 126


def apply_post(wt: Worktree, intent: Intent) -> tuple[Kept, ...]:
    """Write an intent's post-images: creations before deletions, so a crash
    between paths never leaves the content nowhere in the tree.

    A target is written only while it holds its recorded pre-image (or the
    post-image already): one that changed since the pre-image was read is
    someone else's; writing stops there and what was found is returned (the
    caller restores what was written and aborts)."""
    assert intent.post is not None
    modes = tools.post_modes(intent.tool, intent.mode)
    order = sorted(range(len(intent.target)), key=lambda i: intent.post[i] == ABSENT)  # type: ignore[index]
    for n, i in enumerate(order):
        if n:
            crash_point("between-paths")
        kept = put(wt, intent.target[i], intent.post[i], modes[i], f"w{intent.lsn}",
                   ours=(intent.pre[i],))
        if kept is not None:
            return (kept,)
    return ()


@dataclass(frozen=True)
class Restore:
    """What putting a file intent's targets back to their pre-images did."""

    restored: tuple[str, ...]  # paths written back
    kept: tuple[Kept, ...]  # paths left alone: they held bytes gitwal did not write


def restore_pre(wt: Worktree, intent: Intent, also: Collection[str] = ()) -> Restore:
    """Put every target of a file intent that holds gitwal's own bytes (its
    post-image, or a torn prefix of it) back to its pre-image; ``also``: more
    states the caller made safe to overwrite (blobs it saved in the log)."""
    assert intent.post is not None
    done: list[str] = []
    kept: list[Kept] = []
    for i, (path, pre, post, mode) in enumerate(
            zip(intent.target, intent.pre, intent.post, intent.mode, strict=True)):
        if i:
            crash_point("mid-restore")
        now = found(wt, path)
        if now == pre:
            continue
        if now == post or now in also or torn_prefix(wt.repo, wt, path, post, pre):
            wt.set_state(path, pre, mode, f"r{intent.lsn}")
            done.append(path)
        else:
            kept.append(Kept(path, now))
    return Restore(tuple(done), tuple(kept))


def missing_images(repo: pygit2.Repository, intent: Intent) -> list[str]:
    """Targets whose recorded pre-image is not a blob in the object database
    (pruned, or a forged id): such a target cannot be restored."""
    out = []
    for path, pre in zip(intent.target, intent.pre, strict=True):
        if pre != ABSENT and not isinstance(repo.get(pre), pygit2.Blob):
            out.append(path)
    return out
