"""Applying, checking and undoing one step's effect on the working tree.

Shared by the live step protocol (run.py) and by recovery, so that a redo
after a crash writes exactly what the first attempt would have written.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from . import tools
from .durable import crash_point
from .ids import ABSENT
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


def apply_post(wt: Worktree, intent: Intent) -> None:
    """Write an intent's post-images: creations before deletions, so a crash
    between paths never leaves the content nowhere in the tree."""
    assert intent.post is not None
    modes = tools.post_modes(intent.tool, intent.mode)
    order = sorted(range(len(intent.target)), key=lambda i: intent.post[i] == ABSENT)  # type: ignore[index]
    for n, i in enumerate(order):
        if n:
            crash_point("between-paths")
        wt.set_state(intent.target[i], intent.post[i], modes[i], f"w{intent.lsn}")


def restore_pre(wt: Worktree, intent: Intent) -> tuple[str, ...]:
    """Put every target of a file intent back to its pre-image."""
    done = []
    for i, (path, pre, mode) in enumerate(zip(intent.target, intent.pre, intent.mode, strict=True)):
        if i:
            crash_point("mid-restore")
        if wt.state(path) != pre:
            wt.set_state(path, pre, mode, f"r{intent.lsn}")
            done.append(path)
    return tuple(done)
