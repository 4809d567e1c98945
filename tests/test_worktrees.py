"""Linked worktrees (`git worktree add`) share every run's log but not its
tree: a run is bound to the worktree it began in, and its locks are seen
from every worktree."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from gitwal.base.ids import Lsn, RunId
from gitwal.log.store import Store
from gitwal.records.model import Plan

from .conftest import GIT_WAL, git, ok, wal


@pytest.fixture
def trees(repo: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    a, b = tmp_path / "wt-a", tmp_path / "wt-b"
    git(repo, "worktree", "add", "-q", "-b", "a", str(a))
    git(repo, "worktree", "add", "-q", "-b", "b", str(b))
    yield a, b


def _refused_for(proc: subprocess.CompletedProcess[str], owner: Path) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    error, hint = proc.stderr.splitlines()[:2]
    assert error.startswith("error: run x belongs to worktree 'wt-a' at ")
    assert str(owner.resolve()) in error
    assert hint.startswith(f"hint: run the command there: cd {owner.resolve()} && git wal")


@pytest.mark.slow
def test_a_run_refuses_to_change_another_worktree(repo: Path, trees: tuple[Path, Path]) -> None:
    a, b = trees
    ok(a, "begin", "--run", "x", "--task", "in a")
    ok(a, "apply", "--run", "x", "write-file", "f.txt", input=b"from a\n")

    _refused_for(wal(b, "apply", "--run", "x", "write-file", "f.txt", input=b"from b\n"), a)
    _refused_for(wal(b, "exec", "--run", "x", "--", "touch", "g.txt"), a)
    _refused_for(wal(b, "recover", "--run", "x", "--restore"), a)
    _refused_for(wal(b, "checkpoint", "--run", "x"), a)
    assert not (b / "f.txt").exists() and not (b / "g.txt").exists()
    assert (a / "f.txt").read_text() == "from a\n"

    # Read-only views work from anywhere and name the run's worktree.
    st = json.loads(ok(b, "status", "--run", "x", "--json"))
    assert st["worktree"] == {"name": "wt-a", "path": str(a.resolve())}
    assert st["committed"] == [2]
    assert f"worktree: {a.resolve()} (wt-a)" in ok(b, "status", "--run", "x")
    rows = [json.loads(line) for line in ok(b, "log", "--run", "x", "--json").splitlines()]
    assert rows[0]["worktree"] == {"name": "wt-a", "path": str(a.resolve())}
    assert [r["lsn"] for r in rows] == [1, 2, 3]
    [info] = json.loads(ok(repo, "runs", "--json"))
    assert info["worktree"]["path"] == str(a.resolve()) and info["damaged"] is None
    assert "Committed" in ok(b, "prompt", "--run", "x")
    ok(b, "verify", "--run", "x")

    # In its own worktree everything works as before.
    ok(a, "apply", "--run", "x", "write-file", "f.txt", input=b"again\n")
    assert json.loads(ok(a, "recover", "--run", "x", "--json"))["intents"] == []


def test_the_main_worktree_is_bound_too(repo: Path, trees: tuple[Path, Path]) -> None:
    a, _ = trees
    ok(repo, "begin", "--run", "m")
    proc = wal(a, "apply", "--run", "m", "write-file", "f.txt", input=b"x\n")
    assert proc.returncode == 1
    assert f"error: run m belongs to the main worktree at {repo.resolve()}" in proc.stderr
    assert not (a / "f.txt").exists()


def test_an_old_unbound_log_works_from_every_worktree(repo: Path,
                                                     trees: tuple[Path, Path]) -> None:
    a, b = trees
    r = pygit2.Repository(str(repo))
    plan = Plan(RunId("old"), Lsn(1), "before binding", str(r.head.target), "main")
    store = Store(r, RunId("old"))
    with store.locked():
        store.append([plan], [], None)
    assert b"worktree" not in r[r.references["refs/wal/old"].peel(pygit2.Commit)
                                 .tree["000000000001.json"].id].data  # type: ignore[attr-defined]
    ok(b, "apply", "--run", "old", "write-file", "f.txt", input=b"b\n")
    ok(a, "apply", "--run", "old", "write-file", "f.txt", input=b"a\n")
    assert json.loads(ok(a, "status", "--run", "old", "--json"))["worktree"] is None


@pytest.mark.slow
def test_an_exec_in_one_worktree_holds_its_locks_for_all(
        repo: Path, trees: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = trees
    ok(a, "begin", "--run", "x")
    started, release = tmp_path / "started", tmp_path / "release"
    os.mkfifo(started)
    os.mkfifo(release)
    script = f"echo go > {started}; cat {release} > /dev/null; echo made > made.txt"
    proc = subprocess.Popen([GIT_WAL, "exec", "--run", "x", "--", "sh", "-c", script],
                            cwd=a, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(started) as gate:  # blocks until the command runs
            assert gate.read().strip() == "go"
        common = repo / ".git" / "wal" / "locks"
        assert not (a / ".git").is_dir()  # a linked worktree: its git dir is elsewhere
        for name in ("x.lock", "x.2.cmd"):  # visible from every worktree, and held
            fd = os.open(common / name, os.O_RDWR)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)
        holder = json.loads((common / "x.lock").read_text())
        assert holder["pid"] == proc.pid and holder["argv"][1:3] == ["exec", "--run"]

        busy = wal(a, "recover", "--run", "x")
        assert busy.returncode == 1
        assert f"error: run x is in use by another live gitwal process: pid {proc.pid}" \
            in busy.stderr
        _refused_for(wal(b, "recover", "--run", "x"), a)

        os.kill(proc.pid, signal.SIGKILL)  # gitwal alone: the command lives on
        proc.wait()
        orphan = wal(a, "recover", "--run", "x", "--restore")
        assert orphan.returncode == 1
        assert "command of exec step LSN 2 is still running" in orphan.stderr
        rows = [json.loads(line) for line in ok(b, "log", "--run", "x", "--json").splitlines()]
        assert rows[-1]["status"] == "open"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with open(release, "w") as gate:  # lets the command finish
            gate.write("done\n")
    deadline = time.monotonic() + 60
    while (done := wal(a, "recover", "--run", "x", "--restore", "--json")).returncode:
        assert "still running" in done.stderr, done.stderr
        assert time.monotonic() < deadline, "the command never finished"
    [item] = json.loads(done.stdout)["intents"]
    assert item["changed"] == ["made.txt"] and item["action"] == "restored"
    assert not (a / "made.txt").exists()
    assert not (repo / "made.txt").exists() and not (b / "made.txt").exists()


def test_a_logged_worktree_path_is_data_not_a_place_to_go(repo: Path, tmp_path: Path) -> None:
    """A (fetched) plan naming a worktree that is not one of this repository's
    makes gitwal refuse; it never opens, judges or writes the path it names."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    git(outside, "init", "-q")  # another repository the log names
    marker = outside / "marker"
    marker.write_text("keep\n")
    before = sorted(p.name for p in (outside / ".git").iterdir())
    r = pygit2.Repository(str(repo))
    evil = f"{outside}; touch {tmp_path}/pwned"
    plan = Plan(RunId("f"), Lsn(1), "fetched", str(r.head.target), "main", (),
                ("elsewhere", evil))
    store = Store(r, RunId("f"))
    with store.locked():
        store.append([plan], [], None)

    for args in (("prompt", "--run", "f"), ("recover", "--run", "f"),
                 ("apply", "--run", "f", "write-file", "x.txt")):
        proc = wal(repo, *args, input=b"x\n")
        assert proc.returncode == 1, proc.stderr
        assert "belongs to worktree 'elsewhere' at '" in proc.stderr  # quoted, as data
        assert "(no such worktree in this repository now)" in proc.stderr
    assert json.loads(ok(repo, "status", "--run", "f", "--json"))["worktree"]["path"] == evil
    assert marker.read_text() == "keep\n"
    assert sorted(p.name for p in (outside / ".git").iterdir()) == before  # no wal/ made
    assert not (tmp_path / "pwned").exists() and not (repo / "x.txt").exists()
