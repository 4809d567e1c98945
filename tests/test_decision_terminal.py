"""A person's decision is confirmed on the controlling terminal (gitwal/decisions/resolve.py,
`a_person`): `git wal approve` and `git wal resolve` show the step on /dev/tty and
read the answer there, never from stdin; with no terminal they are refused unless
--yes. The terminal is a real pseudo-terminal, the controlling one of a new session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import GIT_WAL, wal
from .test_approve import PUSH, pushes, ready, records
from .test_resolve import in_doubt


def on_terminal(repo: Path, args: list[str], answer: bytes) -> tuple[int, str, str]:
    """``git wal ARGS`` in a new session whose controlling terminal is a pty (stdin
    and stdout are pipes, as in an agent's shell tool); ``answer`` is typed on the pty
    once the question is there. Returns (exit code, what the terminal showed, stderr)."""
    master, slave = os.openpty()
    name = os.ttyname(slave)

    def controlling_terminal() -> None:
        os.setsid()
        os.close(os.open(name, os.O_RDWR))  # a session leader's first tty becomes its own

    proc = subprocess.Popen([GIT_WAL, *args], cwd=repo, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=controlling_terminal, pass_fds=(slave,))
    os.close(slave)  # the child holds it open until it exits: then reads here fail (EIO)
    shown = b""
    try:
        while b"[y/N]" not in shown:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the process exited and closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        if b"[y/N]" in shown:
            os.write(master, answer + b"\n")
        _, err = proc.communicate(input=b"y\n")  # stdin says yes: it must not count
    finally:
        os.close(master)
    return proc.returncode, shown.decode(), err.decode()


def waiting(repo: Path) -> None:
    ready(repo)
    assert wal(repo, *PUSH).returncode == 3


def test_approve_asks_on_the_terminal_and_a_yes_there_approves(repo: Path) -> None:
    waiting(repo)
    code, shown, err = on_terminal(repo, ["approve", "2"], b"y")
    assert code == 0, err
    assert "LSN 2 of run" in shown and "exec: sh -c 'echo pushed >> pushes.log'" in shown
    assert "Approve it? [y/N]" in shown
    assert records(repo)[-1]["type"] == "approval"
    assert wal(repo, *PUSH).returncode == 0 and pushes(repo) == 1


def test_a_no_on_the_terminal_records_nothing(repo: Path) -> None:
    waiting(repo)
    code, shown, err = on_terminal(repo, ["approve", "2"], b"n")
    assert code == 1 and "not confirmed on the terminal" in err, err
    assert "[y/N]" in shown
    assert records(repo)[-1]["type"] == "intent"
    assert wal(repo, *PUSH).returncode == 3 and pushes(repo) == 0


def test_without_a_terminal_a_yes_on_stdin_is_not_a_persons(repo: Path) -> None:
    waiting(repo)
    for command in (["approve", "2"], ["resolve", "2", "--not-applied"]):
        # A new session: no controlling terminal, as under an agent or in CI.
        proc = subprocess.run([GIT_WAL, *command], cwd=repo, input="y\n", text=True,
                              capture_output=True, start_new_session=True)
        assert proc.returncode == 1, proc.stderr
        assert "this process has no controlling terminal" in proc.stderr
        assert "hint: run it in a terminal, or, if you are a person who decided, add --yes" \
            in proc.stderr
    assert records(repo)[-1]["type"] == "intent"
    yes = subprocess.run([GIT_WAL, "approve", "2", "--yes"], cwd=repo, capture_output=True,
                         text=True, start_new_session=True)
    assert yes.returncode == 0, yes.stderr
    assert records(repo)[-1]["type"] == "approval"


def test_resolve_asks_on_the_terminal_too(repo: Path) -> None:
    lsn = in_doubt(repo)
    code, shown, err = on_terminal(repo, ["resolve", str(lsn), "--applied"], b"yes")
    assert code == 0, err
    assert f"LSN {lsn} of run" in shown and "-> applied" in shown
    assert "Resolve it? [y/N]" in shown
    assert records(repo)[-1]["type"] == "commit"
