"""Several runs on one working tree: no lost update (docs/agents-together.md).

Real `git wal` processes race on one file; the race is ordered by a fifo
(GITWAL_PAUSE_AT, docs/crash-safety.md), never by sleeping.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .conftest import GIT_WAL, git, ok, wal


@contextmanager
def paused(proc: subprocess.Popen[bytes], fifo: Path) -> Iterator[None]:
    """Wait until ``proc`` stands at its pause point; let it go on leaving the block."""
    opened: list[int] = []
    opener = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)),
                              daemon=True)
    opener.start()
    opener.join(60)  # the open returns once the process opened the fifo to read
    if not opened:
        proc.kill()
        _, err = proc.communicate()
        with open(fifo, "rb"):  # unblocks the opener thread
            pass
        raise AssertionError(f"the process never reached its pause point: {err.decode()}")
    try:
        yield
    finally:
        os.close(opened[0])


def start_apply(repo: Path, run: str, path: str, content: bytes,
                pause: str, fifo: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [GIT_WAL, "apply", "--run", run, "write-file", path], cwd=repo,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "GITWAL_PAUSE_AT": f"{pause}:{fifo}"},
    )
    assert proc.stdin is not None
    proc.stdin.write(content)
    proc.stdin.close()
    proc.stdin = None  # communicate() must not flush it again
    return proc


def head(repo: Path, run: str) -> str:
    return git(repo, "rev-parse", f"refs/wal/{run}").strip()


def test_second_apply_on_a_path_is_refused_while_the_first_step_runs(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--task", "fix the greeting", "--run", "run-a")
    ok(repo, "begin", "--task", "translate the greeting", "--run", "run-b")
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    for point in ("after-intent", "after-apply"):
        (repo / "README").write_text("hello\n")
        first = start_apply(repo, "run-a", "README", f"A {point}\n".encode(), point, fifo)
        with paused(first, fifo):
            before = head(repo, "run-b")
            on_disk = (repo / "README").read_bytes()
            second = wal(repo, "apply", "--run", "run-b", "write-file", "README",
                         input=b"B\n")
            assert second.returncode == 1, second.stderr
            assert "error: README is being changed by run run-a (task 'fix the greeting')" \
                in second.stderr
            assert "write_file" in second.stderr and "LSN " in second.stderr
            assert "hint: read the file again and retry" in second.stderr
            assert "Traceback" not in second.stderr
            # Nothing written, nothing logged by the refused run.
            assert (repo / "README").read_bytes() == on_disk
            assert head(repo, "run-b") == before
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err.decode()
        assert b"committed" in out
        assert (repo / "README").read_text() == f"A {point}\n"
        # Once the first step is over, the second run's retry goes through.
        ok(repo, "apply", "--run", "run-b", "write-file", "README", input=b"B\n")
        assert (repo / "README").read_text() == "B\n"


def test_a_multi_path_step_is_refused_on_any_held_path(repo: Path, tmp_path: Path) -> None:
    (repo / "b.txt").write_text("b\n")
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    first = start_apply(repo, "run-a", "b.txt", b"new b\n", "after-intent", fifo)
    with paused(first, fifo):
        before = head(repo, "run-b")
        moved = wal(repo, "apply", "--run", "run-b", "move-file", "b.txt", "d.txt")
        assert moved.returncode == 1
        assert "b.txt is being changed by run run-a" in moved.stderr
        assert not (repo / "d.txt").exists()
        assert head(repo, "run-b") == before
        # A step on another path is not held up.
        ok(repo, "apply", "--run", "run-b", "write-file", "c.txt", input=b"c\n")
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err.decode()
    assert (repo / "b.txt").read_text() == "new b\n"
