"""Group commit (docs/format.md, "Group commit"): a file step's commit record
rides in the run's next append. Held back, it exists in one process only;
every other reader sees the step's intent open, and a killed process leaves
exactly what recovery commits ("applied, commit missing")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gitwal import Wal

from .conftest import git, ok


def _rows(repo: Path, run: str) -> list[dict[str, object]]:
    out = ok(repo, "log", "--run", run, "--json")
    return [json.loads(line) for line in out.splitlines()]


def _appends(repo: Path, run: str) -> int:
    return int(git(repo, "rev-list", "--count", f"refs/wal/{run}").strip())


def test_a_steps_commit_rides_in_the_next_append(repo: Path) -> None:
    run = Wal(repo).begin(task="grouped", run_id="g", group_commit=True)
    results = [run.write_file(f"f{i}.txt", f"{i}\n") for i in range(3)]
    assert [r.durable for r in results] == [False, False, False]
    # plan, then one append per step: intent 1, [commit 1, intent 2], [commit 2, intent 3]
    assert _appends(repo, "g") == 4
    rows = _rows(repo, "g")  # another process: the last step reads open
    assert [r["type"] for r in rows] == ["plan", "intent", "commit", "intent", "commit",
                                         "intent"]
    assert [r["lsn"] for r in rows] == [1, 2, 3, 4, 5, 6]
    run.flush()
    assert _appends(repo, "g") == 5
    rows = _rows(repo, "g")
    assert [r["type"] for r in rows][-2:] == ["intent", "commit"]
    assert rows[-1]["intent"] == 6
    ok(repo, "verify", "--run", "g")
    assert [(repo / f"f{i}.txt").read_text() for i in range(3)] == ["0\n", "1\n", "2\n"]


def test_this_processs_own_reads_see_the_step_committed(repo: Path) -> None:
    run = Wal(repo).begin(task="grouped", run_id="g", group_commit=True)
    run.write_file("a.txt", "a\n")
    assert [type(r).__name__ for r in run.records()] == ["Plan", "Intent", "Commit"]
    assert _appends(repo, "g") == 3  # the read made it durable first


def test_without_group_commit_a_step_is_durable_when_it_returns(repo: Path) -> None:
    run = Wal(repo).begin(task="plain", run_id="p")
    assert run.write_file("a.txt", "a\n").durable
    assert [r["type"] for r in _rows(repo, "p")] == ["plan", "intent", "commit"]


_AGENT = r"""
import sys
from gitwal import Wal
wal = Wal(sys.argv[1])
run = wal.begin(task="grouped", run_id="k", group_commit=True)
for i in range(3):
    run.write_file(f"f{i}.txt", f"{i}\n")
print("stepped", flush=True)
if sys.argv[2] == "wait":
    sys.stdin.read()  # killed here, the last commit held back
"""


def _agent(repo: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _AGENT, str(repo), mode], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def test_a_killed_process_leaves_the_step_for_recovery_to_commit(repo: Path) -> None:
    with _agent(repo, "wait") as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "stepped\n"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    rows = _rows(repo, "k")
    assert rows[-1]["type"] == "intent" and rows[-1]["lsn"] == 6
    report = json.loads(ok(repo, "recover", "--run", "k", "--json"))
    assert [o["outcome"] for o in report["intents"]] == ["applied-missing-commit"]
    rows = _rows(repo, "k")
    assert rows[-1]["type"] == "commit" and rows[-1]["intent"] == 6
    assert (repo / "f2.txt").read_text() == "2\n"
    ok(repo, "verify", "--run", "k")


def test_a_normal_exit_writes_the_held_back_commit(repo: Path) -> None:
    proc = _agent(repo, "exit")
    out, _ = proc.communicate()
    assert proc.returncode == 0 and out == "stepped\n"
    rows = _rows(repo, "k")
    assert rows[-1]["type"] == "commit" and rows[-1]["intent"] == 6


def test_a_step_another_process_closed_is_not_closed_twice(repo: Path) -> None:
    """Recovery in another process (the run lock is free between steps) commits
    the held-back step; this process's next step follows the log, not its memory."""
    run = Wal(repo).begin(task="grouped", run_id="g", group_commit=True)
    run.write_file("a.txt", "a\n")
    ok(repo, "recover", "--run", "g")
    second = run.write_file("b.txt", "b\n")
    run.flush()
    rows = _rows(repo, "g")
    assert [r["type"] for r in rows] == ["plan", "intent", "commit", "intent", "commit"]
    assert second.lsn == 4
    assert [r["lsn"] for r in rows] == [1, 2, 3, 4, 5]
    ok(repo, "verify", "--run", "g")


def test_a_with_block_ends_with_the_held_back_commit_written(repo: Path) -> None:
    with Wal(repo).begin(task="grouped", run_id="g", group_commit=True) as run:
        run.write_file("a.txt", "a\n")
        assert _rows(repo, "g")[-1]["type"] == "intent"
    assert _rows(repo, "g")[-1]["type"] == "commit"


def test_other_objects_of_this_process_read_the_step_committed(repo: Path) -> None:
    """A second object of the same run, and another run's step on the same
    path, find the held-back commit written, not an interrupted step."""
    wal = Wal(repo)
    first = wal.begin(task="grouped", run_id="g", group_commit=True)
    first.write_file("a.txt", "a\n")
    again = wal.run("g")
    assert again.write_file("b.txt", "b\n").durable
    first.write_file("c.txt", "c\n")
    other = wal.begin(task="other", run_id="o")
    other.write_file("c.txt", "theirs\n")
    rows = _rows(repo, "g")
    assert [r["type"] for r in rows] == ["plan", "intent", "commit", "intent", "commit",
                                         "intent", "commit"]
    ok(repo, "verify", "--run", "g")


def test_a_run_object_its_caller_dropped_is_flushed_at_exit(repo: Path) -> None:
    script = ("import sys, gc\nfrom gitwal import Wal\n"
              "def f():\n"
              "    Wal(sys.argv[1]).begin(run_id='k', group_commit=True).write_file('a', 'a')\n"
              "f()\ngc.collect()\n")
    subprocess.run([sys.executable, "-c", script, str(repo)], check=True)
    assert _rows(repo, "k")[-1]["type"] == "commit"


def test_a_second_object_of_the_run_carries_the_first_ones_commit(repo: Path) -> None:
    """Opened before the first object's step, the second takes the run lock
    for its own step, where the first cannot write: it carries the record."""
    wal = Wal(repo)
    first = wal.begin(task="grouped", run_id="g", group_commit=True)
    second = wal.run("g")
    first.write_file("a.txt", "a\n")
    second.write_file("b.txt", "b\n")
    assert _appends(repo, "g") == 4  # plan, intent, [commit, intent], commit
    rows = _rows(repo, "g")
    assert [r["type"] for r in rows] == ["plan", "intent", "commit", "intent", "commit"]
    first.flush()  # nothing left to write: the second carried it
    assert _appends(repo, "g") == 4 and not first.store.deferred
