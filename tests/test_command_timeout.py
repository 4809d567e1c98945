"""`--timeout` for checks and exec commands: a hung command does not hold the run.

The hung command waits on a FIFO nobody writes (no sleep); it also starts a
child. Every process of the command holds the write end of a second FIFO
whose read end the test holds: EOF on it proves the whole process group is
gone.
"""

from __future__ import annotations

import json
import os
import select
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import git, ok, wal


class Gates:
    def __init__(self, base: Path) -> None:
        self.gate = base / "gate.fifo"  # nobody ever writes it: reading it hangs
        self.alive = base / "alive.fifo"  # held open for writing by the command's group
        os.mkfifo(self.gate)
        os.mkfifo(self.alive)
        # Open the read end first (non-blocking), so the command's open for
        # writing does not wait for us.
        self.fd = os.open(self.alive, os.O_RDONLY | os.O_NONBLOCK)

    def hang(self) -> str:
        """A shell script that keeps the alive FIFO open in itself and a child,
        then hangs on the gate."""
        return f"exec 3>{self.alive}; cat {self.gate} & cat {self.gate}; wait"

    def group_gone(self) -> bool:
        """EOF on the alive FIFO: no process holds its write end any more."""
        readable, _, _ = select.select([self.fd], [], [], 30)
        return bool(readable) and os.read(self.fd, 1) == b""


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[Gates]:
    g = Gates(tmp_path)
    yield g
    os.close(g.fd)


def _log(repo: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in ok(repo, "log", "--json").splitlines()]


def test_a_hung_check_times_out_and_the_step_aborts(repo: Path, gates: Gates) -> None:
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "apply", "--check", gates.hang(), "--timeout", "2", "write-file",
               "README", "--from", "-", input=b"changed\n")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: LSN 2 write_file aborted: check timed out after "
                                  "2 s: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert gates.group_gone()
    assert (repo / "README").read_text() == "hello\n"  # the pre-image is back
    abort = _log(repo)[-1]
    assert abort["type"] == "abort" and abort["intent"] == 2
    assert abort["reason"] == f"check timed out after 2 s: {gates.hang()}"
    assert abort["restored"] == ["README"]
    # The run is usable afterwards.
    ok(repo, "apply", "--check", "true", "write-file", "README", "--from", "-",
       input=b"again\n")
    assert (repo / "README").read_text() == "again\n"


def test_a_hung_exec_times_out_its_changes_are_restored(repo: Path, gates: Gates) -> None:
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "exec", "--timeout", "2", "--", "sh", "-c",
               f"echo new > made.txt; {gates.hang()}")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: LSN 2 exec aborted: command timed out after 2 s; "
                                  "1 changed path(s) restored"), proc.stderr
    assert gates.group_gone()
    assert not (repo / "made.txt").exists()
    abort = _log(repo)[-1]
    assert abort["type"] == "abort" and abort["reason"] == "command timed out after 2 s"
    assert abort["restored"] == ["made.txt"]
    ok(repo, "exec", "--", "sh", "-c", "echo ok > ok.txt")
    assert (repo / "ok.txt").read_text() == "ok\n"


def test_the_default_comes_from_git_config(repo: Path, gates: Gates) -> None:
    git(repo, "config", "wal.commandTimeout", "1.5")
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "exec", "--check", gates.hang(), "--", "true")
    assert proc.returncode == 1, proc.stderr
    assert "check timed out after 1.5 s" in proc.stderr
    assert gates.group_gone()
    # A command that finishes in time is not affected.
    ok(repo, "exec", "--check", "true", "--", "true")


def test_a_bad_timeout_is_refused_before_anything_runs(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--task", "t")
    ran = tmp_path / "ran"
    proc = wal(repo, "exec", "--timeout", "0", "--", "touch", str(ran))
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert "Traceback" not in proc.stderr
    git(repo, "config", "wal.commandTimeout", "soon")
    proc = wal(repo, "exec", "--", "touch", str(ran))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: wal.commandTimeout is 'soon', not a positive "
                                  "number of seconds\nhint: ")
    assert not ran.exists()
    assert [r["type"] for r in _log(repo)] == ["plan"]  # refused before the intent
    git(repo, "config", "--unset", "wal.commandTimeout")
    ok(repo, "exec", "--", "touch", str(ran))
    assert ran.exists()


@pytest.mark.parametrize("option,value", [
    ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "1e300"), ("--timeout", "-1"),
    ("--wait-timeout", "nan"), ("--wait-timeout", "inf"), ("--wait-timeout", "1e300")])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_before_the_intent(
        repo: Path, tmp_path: Path, option: str, value: str) -> None:
    """`apply --timeout nan --check CMD` died with a traceback after its intent
    was durable and the file written, leaving the step open."""
    ok(repo, "begin", "--task", "t")
    ran = tmp_path / "ran"
    for args in (["apply", option, value, "--check", f"touch {ran}", "ensure-line", "f.txt",
                  "x"], ["exec", option, value, "--", "touch", str(ran)]):
        proc = wal(repo, *args)
        assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
        assert "Traceback" not in proc.stderr
    assert not ran.exists() and not (repo / "f.txt").exists()
    assert [r["type"] for r in _log(repo)] == ["plan"]  # nothing logged, nothing open
    git(repo, "config", "wal.commandTimeout", "nan")
    proc = wal(repo, "exec", "--", "touch", str(ran))
    assert proc.returncode == 1 and "wal.commandTimeout is 'nan'" in proc.stderr
    git(repo, "config", "--unset", "wal.commandTimeout")
    git(repo, "config", "wal.waitTimeout", "inf")
    proc = wal(repo, "exec", "--", "touch", str(ran))
    assert proc.returncode == 1 and "wal.waitTimeout is 'inf'" in proc.stderr
    assert [r["type"] for r in _log(repo)] == ["plan"] and not ran.exists()


def test_a_library_caller_s_nan_timeout_is_refused_before_the_intent(repo: Path) -> None:
    from gitwal import Wal
    from gitwal.base.errors import ToolRefused

    run = Wal(str(repo)).begin(task="t")
    with pytest.raises(ToolRefused):
        run.apply("ensure_line", path="f.txt", line="x", check="true", timeout=float("nan"))
    assert not (repo / "f.txt").exists()
    assert [r["type"] for r in _log(repo)] == ["plan"]
