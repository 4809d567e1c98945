"""A second writer of a run waits for the first, says who holds the run
after a second, and gives up after --wait-timeout (exit 4)."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import GIT_WAL, git, ok, wal

EXIT_LOCK_TIMEOUT = 4


@contextmanager
def held(repo: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """An exec step of run r that holds the run lock until the block ends."""
    started, release = tmp_path / "started", tmp_path / "release"
    for fifo in (started, release):
        if not fifo.exists():
            os.mkfifo(fifo)
    script = f"echo go > {started}; cat {release} > /dev/null"
    proc = subprocess.Popen([GIT_WAL, "exec", "--run", "r", "--", "sh", "-c", script],
                            cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(started) as gate:  # the command runs: gitwal holds the run lock
            assert gate.read().strip() == "go"
        yield proc
    finally:
        with open(release, "w") as gate:
            gate.write("done\n")
        assert proc.wait() == 0


def test_a_waiting_writer_names_the_holder(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "r")
    with held(repo, tmp_path) as holder:
        second = subprocess.Popen(
            [GIT_WAL, "apply", "--run", "r", "write-file", "f.txt"], cwd=repo,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert second.stdin is not None and second.stderr is not None
        second.stdin.write("second\n")
        second.stdin.close()
        # The waiter speaks (a bound, not an ordering: without it, this would hang).
        ready, _, _ = select.select([second.stderr], [], [], 60)
        assert ready, "the waiting writer said nothing"
        line = second.stderr.readline()
        assert re.fullmatch(
            rf"gitwal: waiting for run r: held by pid {holder.pid} "
            r"\(`git-wal exec --run r -- sh -c .*`\) for \d+\.\d s\n", line), line
        assert second.poll() is None  # still waiting, not failed
    assert second.stdout is not None
    with second.stdout, second.stderr:
        out, err = second.stdout.read(), second.stderr.read()
    assert second.wait() == 0, err
    assert "LSN 4 write_file f.txt: committed" in out
    assert (repo / "f.txt").read_text() == "second\n"


@pytest.mark.slow
def test_wait_timeout_ends_the_wait(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "r")
    with held(repo, tmp_path) as holder:
        proc = wal(repo, "apply", "--run", "r", "--wait-timeout", "1", "write-file", "f.txt",
                   input=b"x\n")
        assert proc.returncode == EXIT_LOCK_TIMEOUT, proc.stderr
        lines = proc.stderr.splitlines()  # the error names the holder: no other line
        assert lines[0].startswith(f"error: run r is still held by pid {holder.pid} (`git-wal "
                                   "exec --run r")
        assert "gave up after 1." in lines[0]
        assert lines[1].startswith("hint: wait for that process to finish")
        assert len(lines) == 2

        git(repo, "config", "wal.waitTimeout", "0")  # the default, from git config
        proc = wal(repo, "exec", "--run", "r", "--", "touch", "g.txt")
        assert proc.returncode == EXIT_LOCK_TIMEOUT and "gave up after 0.0 s" in proc.stderr

        busy = wal(repo, "recover", "--run", "r")  # recover never waits
        assert busy.returncode == 1
        assert f"live gitwal process: pid {holder.pid} (`git-wal exec" in busy.stderr
    assert not (repo / "f.txt").exists() and not (repo / "g.txt").exists()
    git(repo, "config", "wal.waitTimeout", "soon")
    bad = wal(repo, "apply", "--run", "r", "write-file", "f.txt", input=b"x\n")
    assert bad.returncode == 1 and bad.stderr == (
        "error: wal.waitTimeout is 'soon', not a number of seconds\n"
        "hint: fix it with `git config wal.waitTimeout SECONDS`\n")
    git(repo, "config", "--unset", "wal.waitTimeout")
    ok(repo, "apply", "--run", "r", "write-file", "f.txt", input=b"x\n")
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert [r["type"] for r in rows] == ["plan", "intent", "commit", "intent", "commit"]
