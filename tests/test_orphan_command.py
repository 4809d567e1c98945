"""An exec step's command outlives the gitwal process that ran it (the OOM
killer took the agent alone): recovery must not decide the step while the
command, or anything it started, still runs, and decides it once it is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from .conftest import GIT_WAL, ok, wal

SCRIPT = "sleep 1; echo made > made.txt; sleep 1; echo late > late.txt"


def test_recover_waits_for_an_orphaned_command(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "orphan")
    proc = subprocess.Popen([GIT_WAL, "exec", "--run", "r", "--", "sh", "-c", SCRIPT],
                            cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = repo / ".git" / "wal" / "locks" / "r.2.cmd"
    deadline = time.monotonic() + 30
    while not lock.exists():  # the intent is durable before the lock file exists
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)  # the process alone: `sh` lives on
    proc.wait()

    busy = wal(repo, "recover", "--run", "r", "--restore")
    assert busy.returncode == 1, busy.stderr
    assert "command of exec step LSN 2 is still running" in busy.stderr
    assert "hint: wait for it to exit" in busy.stderr
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert rows[-1]["type"] == "intent" and rows[-1]["status"] == "open"  # nothing decided
    assert "still running" in ok(repo, "prompt", "--run", "r")  # the dry run says why

    deadline = time.monotonic() + 30
    while (done := wal(repo, "recover", "--run", "r", "--restore", "--json")).returncode:
        assert "still running" in done.stderr, done.stderr
        assert time.monotonic() < deadline, "the orphaned command never finished"
        time.sleep(0.05)
    assert (repo / "late.txt").exists() or not (repo / "made.txt").exists()
    report = json.loads(done.stdout)
    [item] = report["intents"]
    assert item["outcome"] == "in-doubt" and item["action"] == "restored"
    assert sorted(item["changed"]) == ["late.txt", "made.txt"]  # the whole effect, not half
    assert not (repo / "made.txt").exists() and not (repo / "late.txt").exists()
    assert not lock.exists()
