"""An exec step's command outlives the gitwal process that ran it (the OOM
killer took the agent alone): recovery must not decide the step while the
command, or anything it started, still runs, and decides it once it is gone.

Events are ordered by FIFOs only: the command blocks reading one until the
test opens it for writing, and opening a FIFO for writing returns only once
the command has reached the read (so everything before the read is done)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import GIT_WAL, ok, wal

# Each `cat` blocks until the test opens the FIFO for writing and closes it.
SCRIPT = ('echo up > "$READY"; cat "$GATE1" >/dev/null; echo made > made.txt; '
          'cat "$GATE2" >/dev/null; echo late > late.txt')


def _release(gate: Path) -> None:
    """Returns once the command is reading ``gate`` (open blocks until then), then lets it go."""
    with open(gate, "w") as f:
        f.write("go\n")


def _still_running(repo: Path) -> None:
    busy = wal(repo, "recover", "--run", "r", "--restore")
    assert busy.returncode == 1, busy.stderr
    assert "command of exec step LSN 2 is still running" in busy.stderr
    assert "hint: wait for it to exit" in busy.stderr
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert rows[-1]["type"] == "intent" and rows[-1]["status"] == "open"  # nothing decided


@pytest.mark.slow
def test_recover_waits_for_an_orphaned_command(repo: Path, tmp_path: Path) -> None:
    gates = {name: tmp_path / name for name in ("READY", "GATE1", "GATE2")}  # outside the tree
    for gate in gates.values():
        os.mkfifo(gate)
    ok(repo, "begin", "--run", "r", "--task", "orphan")
    proc = subprocess.Popen([GIT_WAL, "exec", "--run", "r", "--", "sh", "-c", SCRIPT],
                            cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **{k: str(v) for k, v in gates.items()}})
    lock = repo / ".git" / "wal" / "locks" / "r.2.cmd"
    # Opening READY for reading returns once the command opened it to write:
    # the command runs (and holds the lock) before gitwal is killed.
    with open(gates["READY"]) as ready:
        assert ready.read() == "up\n"
    assert lock.exists()
    os.kill(proc.pid, signal.SIGKILL)  # the process alone: `sh` lives on, blocked on GATE1
    proc.wait()

    _still_running(repo)  # the command has done nothing yet
    assert not (repo / "made.txt").exists()
    assert "still running" in ok(repo, "prompt", "--run", "r")  # the dry run says why

    _release(gates["GATE1"])
    # The command reads GATE2 only after made.txt is written: opening it for
    # writing below returns once it is there, so half the effect is in the tree.
    with open(gates["GATE2"], "w") as gate2:
        assert (repo / "made.txt").exists() and not (repo / "late.txt").exists()
        _still_running(repo)  # half done: still not decided
        gate2.write("go\n")

    # The command ends on its own after the gate closes; recovery answers
    # "still running" until it has (a retry, not a timing assumption).
    deadline = time.monotonic() + 60
    while (done := wal(repo, "recover", "--run", "r", "--restore", "--json")).returncode:
        assert "still running" in done.stderr, done.stderr
        assert time.monotonic() < deadline, "the orphaned command never finished"
    report = json.loads(done.stdout)
    [item] = report["intents"]
    assert item["outcome"] == "in-doubt" and item["action"] == "restored"
    assert sorted(item["changed"]) == ["late.txt", "made.txt"]  # the whole effect, not half
    assert not (repo / "made.txt").exists() and not (repo / "late.txt").exists()
    assert not lock.exists()
