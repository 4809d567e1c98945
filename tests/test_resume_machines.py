"""Machines lost at random, their run resumed elsewhere (docs/remote-runs.md,
"Taking a run over"): one run of PLAN plan steps through up to
``GITWAL_RESUME_MACHINES`` (default 6, at most 8) clones of one repository on
a real smart-HTTP server, each machine killed mid-step at a random crash
point (its pusher SIGKILLed, its directory deleted) or cut off (kept, its
remote pointed nowhere, brought back after the takeover: fenced), the next
fresh clone resuming from the prompt's facts. In the end: each plan step
committed exactly once, the tree byte-identical to the run never
interrupted, every cut-off machine refused with exit 6, and the remote's
logs verified and ordered by a clean clone.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, tree_of, wal
from .gitservers import HttpGitServer
from .test_remote_replication import _setup, local_head, remote_head, until
from .test_resume import DEAD_URL, _clone, _committed_steps, _kill_machine

PLAN = 10
CRASHES = ("after-intent", "mid-write", "after-apply", "after-verify")
MACHINES = min(8, int(os.environ.get("GITWAL_RESUME_MACHINES", "6")))


def _text(n: int) -> str:
    return f"step {n}: " + "x" * n + "\n"


def _do(clone: Path, n: int, crash: str | None = None) -> int:
    proc = wal(clone, "apply", "--step", str(n), "write-file", f"src/f{n}.txt", "--from", "-",
               input=_text(n).encode(), env={"GITWAL_CRASH_AT": crash} if crash else None)
    return proc.returncode


def _landed(bare: Path, run: str, head: str) -> Callable[[], bool]:
    return lambda: remote_head(bare, run) == head


@pytest.mark.slow
def test_a_run_survives_machines_lost_at_random(http_git_server: HttpGitServer,
                                                tmp_path: Path) -> None:
    seed = int(os.environ.get("GITWAL_RESUME_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    s = next(_setup(http_git_server, tmp_path))
    git(s.clone, "config", "wal.remote.durability", "commit")
    run = ok(s.clone, "begin", "--task", "ten files",
             *[a for n in range(1, PLAN + 1) for a in ("--step", f"write f{n}")]).strip()
    holder, machines, fenced = s.clone, 1, []
    done = 0
    while done < PLAN:
        n = done + 1
        lose = machines < MACHINES and rng.random() < 0.4
        if not lose:
            assert _do(holder, n) == 0, f"seed {seed}: step {n}"
            done = n
            continue
        machines += 1
        if rng.random() < 0.3:  # cut off, not dead: it comes back later
            git(holder, "remote", "set-url", "origin", DEAD_URL)
            fenced.append(holder)
        else:
            crash = rng.choice(CRASHES)
            assert _do(holder, n, crash) != 0, f"seed {seed}: {crash} did not kill"
            until("the open step on the remote", _landed(s.bare, run, local_head(holder, run)))
            _kill_machine(holder)
        holder = _clone(s, f"m{machines}")
        git(holder, "config", "wal.remote.durability", "commit")  # each machine's own setting
        doc = json.loads(ok(holder, "resume", run, "--json"))
        committed = _committed_steps(holder, run)
        assert committed == list(range(1, len(committed) + 1)), (seed, committed)
        done = len(committed)
        if doc["closed"] is not None:
            assert "redo LSN" in doc["prompt"], (seed, doc["prompt"])
    until("on the remote", _landed(s.bare, run, local_head(holder, run)))
    for old in fenced:  # back on the network: fenced off the run, nothing pushed
        git(old, "remote", "set-url", "origin", s.server.url("logs.git"))
        before = remote_head(s.bare, run)
        _do(old, PLAN)  # its append's push is refused: that is what fences it
        until("fenced", (old / ".git/wal/replica/origin/fenced").is_dir)
        assert _do(old, PLAN) == 6, f"seed {seed}"
        assert remote_head(s.bare, run) == before
    assert _committed_steps(holder, run) == list(range(1, PLAN + 1)), f"seed {seed}"
    straight = init_repo(tmp_path / "straight", {"a.txt": "0\n"})
    ok(straight, "begin", "--task", "ten files")
    for n in range(1, PLAN + 1):
        assert _do(straight, n) == 0
    assert tree_of(holder) == tree_of(straight), f"seed {seed}"
    judge = _clone(s, "judge")
    ok(judge, "verify", "--all", "--remote", "origin")
    ok(holder, "order", "--remote", "origin")  # the replay meets the tree the run left
