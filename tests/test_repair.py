"""A log whose newest append lost an object (removed by hand, as a racing
prune would): every reader says so and names `git wal repair`; `runs` still
lists the other runs; repair cuts the log back and keeps what survived."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import git, loose_object, ok, wal


def _damaged(proc: subprocess.CompletedProcess[str], run: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ")
    assert f"hint: objects of the log are missing; `git wal repair {run}` cuts" in proc.stderr


def _two_runs(repo: Path) -> str:
    ok(repo, "hooks", "install")  # its reference-transaction hook refuses rewinds by git
    ok(repo, "begin", "--run", "other", "--task", "fine")
    ok(repo, "apply", "--run", "other", "write-file", "o.txt", input=b"o\n")
    ok(repo, "begin", "--run", "x", "--task", "hit")
    ok(repo, "apply", "--run", "x", "write-file", "a.txt", input=b"a\n")
    ok(repo, "apply", "--run", "x", "write-file", "b.txt", input=b"b\n")
    return git(repo, "rev-parse", "refs/wal/x").strip()


@pytest.mark.slow
def test_a_damaged_log_is_reported_and_repaired(repo: Path) -> None:
    head = _two_runs(repo)
    blob = git(repo, "rev-parse", "refs/wal/x:000000000005.json").strip()
    loose_object(repo, blob).unlink()  # the commit record of LSN 4 is gone

    for args in (("status", "--run", "x"), ("recover", "--run", "x"),
                 ("log", "--run", "x"), ("apply", "--run", "x", "write-file", "c.txt"),
                 ("checkpoint", "--run", "x"), ("drop", "x"), ("seal", "--run", "x")):
        _damaged(wal(repo, *args, input=b"c\n"), "x")
    assert not (repo / "c.txt").exists()
    assert git(repo, "rev-parse", "refs/wal/x").strip() == head  # nothing appended or dropped
    runs = {r["run"]: r for r in json.loads(ok(repo, "runs", "--json"))}
    assert runs["other"]["damaged"] is None and runs["other"]["records"] == 3
    assert "LSN 5" in runs["x"]["damaged"] and "record blob is missing" in runs["x"]["damaged"]
    text = ok(repo, "runs")
    assert "x  DAMAGED: " in text and "(`git wal repair x`)" in text and "other  3 records" in text

    refused = wal(repo, "repair", "other")
    assert refused.returncode == 1
    assert "error: run other is not damaged" in refused.stderr and "hint: " in refused.stderr

    report = json.loads(ok(repo, "repair", "x", "--json"))
    assert report["kept"] == 4 and report["lost"] == [5]
    assert report["damaged_head"] == head
    assert report["archive"] == "refs/wal-archive/x/repair-1"
    kept = git(repo, "rev-parse", "refs/wal/x").strip()
    assert kept == git(repo, "rev-parse", f"{head}^").strip() == report["head"]
    evidence = json.loads(git(repo, "show", "refs/wal-archive/x/repair-1:repair.json"))
    assert evidence["damaged_head"] == head and evidence["lost"] == [5]
    assert git(repo, "rev-parse", "refs/wal-archive/x/repair-1^").strip() == kept
    # The record blob survived nowhere; the intent's post-image blob did.
    names = git(repo, "ls-tree", "--name-only", "refs/wal-archive/x/repair-1").split()
    assert "cut-000000000005.json" not in names and "repair.json" in names

    # Intent 4 is open again: recovery decides it (b.txt holds its post-image).
    rec = json.loads(ok(repo, "recover", "--run", "x", "--json"))
    [item] = rec["intents"]
    assert item["lsn"] == 4 and item["outcome"] == "applied-missing-commit"
    assert (repo / "b.txt").read_text() == "b\n"
    ok(repo, "verify", "--run", "x")
    ok(repo, "verify", "--all")
    ok(repo, "apply", "--run", "x", "write-file", "c.txt", input=b"c\n")
    st = json.loads(ok(repo, "status", "--run", "x", "--json"))
    assert st["committed"] == [2, 4, 6] and st["open"] == []
    git(repo, "gc", "--prune=now", "-q")  # the archive reaches no missing object
    git(repo, "fsck", "--no-dangling")
    again = wal(repo, "repair", "x")
    assert again.returncode == 1 and "is not damaged" in again.stderr


@pytest.mark.slow
def test_a_log_whose_head_commit_is_gone_is_refused_cleanly(repo: Path) -> None:
    head = _two_runs(repo)
    loose_object(repo, head).unlink()
    _damaged(wal(repo, "status", "--run", "x"), "x")
    assert json.loads(ok(repo, "status", "--run", "other", "--json"))["records"] == 3
    proc = wal(repo, "repair", "x")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "error: run x: a commit of the log is missing" in proc.stderr
    assert git(repo, "rev-parse", "refs/wal/x").strip() == head  # nothing moved


@pytest.mark.slow
def test_a_missing_named_object_is_damage_too(repo: Path) -> None:
    _two_runs(repo)
    killed = wal(repo, "apply", "--run", "x", "write-file", "z.txt", input=b"z\n",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -9  # the intent (LSN 6) is the newest append
    [obj] = [n for n in git(repo, "ls-tree", "--name-only", "refs/wal/x").split()
             if n.startswith("obj-")]  # z.txt's post-image, named by the intent
    loose_object(repo, obj[len("obj-"):]).unlink()
    _damaged(wal(repo, "apply", "--run", "x", "write-file", "c.txt", input=b"c\n"), "x")
    _damaged(wal(repo, "recover", "--run", "x"), "x")
    assert not (repo / "z.txt").exists() and not (repo / "c.txt").exists()
    report = json.loads(ok(repo, "repair", "x", "--json"))
    assert report["kept"] == 5 and report["lost"] == [6]
    assert f"object {obj[4:16]} ({obj}) is missing" in report["reason"]
    names = git(repo, "ls-tree", "--name-only", report["archive"]).split()
    assert "cut-000000000006.json" in names  # the intent record itself survived
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "x", "--json").splitlines()]
    assert [r["lsn"] for r in rows] == [1, 2, 3, 4, 5]
    assert json.loads(ok(repo, "recover", "--run", "x", "--json"))["intents"] == []
    ok(repo, "verify", "--run", "x")
