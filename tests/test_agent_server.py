"""The fast path: the stdlib hook client and the per-repository hook server.

The client is run exactly as `git wal install claude` writes it, through
`sh -c`; servers live in a private runtime dir per test and are stopped after.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import GIT_WAL, ok, wait_exit, wal
from .test_agent_payloads import claude_run, claude_tool, wal_log

RUN = claude_run()


@pytest.fixture
def rundir() -> Iterator[Path]:
    # The test's own XDG_RUNTIME_DIR (the `hermetic` fixture): private, empty, and
    # short enough for a socket path (108 bytes) under any pytest base dir.
    base = Path(os.environ["XDG_RUNTIME_DIR"])
    assert not any(base.iterdir())
    yield base / "gitwal"
    # The servers this test started: stopped the documented way (none may linger).
    stop = subprocess.run([GIT_WAL, "agent-server", "--stop", "--all", "--json"],
                          capture_output=True, text=True)
    assert stop.returncode == 0, stop.stderr
    assert all(lock_is_free(lock) for lock in (base / "gitwal").glob("*.lock"))


def runs_agent_server(pid: int) -> bool:
    try:  # an exiting process has an empty command line, a reaped one none
        return b"agent-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False


def lock_is_free(lock: Path) -> bool:
    """No server holds ``lock`` (a server holds it for its whole life)."""
    with lock.open() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def command(repo: Path) -> str:
    ok(repo, "install", "claude", "--scope", "local")
    data = json.loads((repo / ".claude" / "settings.local.json").read_text())
    cmd = data["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert isinstance(cmd, str) and "git-wal-hook" in cmd
    return cmd


def hook(repo: Path, cmd: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], cwd=repo, input=json.dumps(payload),
                          capture_output=True, text=True)


def edit_round(repo: Path, cmd: str, call: str, old: str, new: str) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": old, "new_string": new}
    pre = hook(repo, cmd, claude_tool(repo, "PreToolUse", "Edit", edit, call))
    assert pre.returncode == 0, pre.stderr
    (repo / "README").write_text((repo / "README").read_text().replace(old, new))
    post = hook(repo, cmd, claude_tool(repo, "PostToolUse", "Edit", edit, call))
    assert post.returncode == 0, post.stderr


def server_pid(rundir: Path) -> int:
    [lock] = list(rundir.glob("*.lock"))
    return int(lock.read_text())


def statuses(repo: Path) -> list[str]:
    return [r["status"] for r in wal_log(repo, RUN) if r["type"] == "intent"]


@pytest.mark.slow
def test_the_client_starts_a_private_server_and_logs_through_it(repo: Path,
                                                                rundir: Path) -> None:
    cmd = command(repo)
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    assert statuses(repo) == ["committed"]
    assert stat.S_IMODE(rundir.stat().st_mode) == 0o700
    [sock] = list(rundir.glob("*.sock"))
    st = sock.stat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    pid = server_pid(rundir)
    edit_round(repo, cmd, "toolu_2", "bye", "ciao")
    assert server_pid(rundir) == pid  # the same server answered
    assert statuses(repo) == ["committed", "committed"]


def test_the_plugins_copy_of_the_client_talks_to_the_same_server(repo: Path,
                                                                 rundir: Path) -> None:
    # One file, framing.py inlined (`python -m gitwal.agents.plugin_client`).
    copy = Path(__file__).resolve().parent.parent / "hooks/claude-code/scripts/gitwal_client.py"
    cmd = f"{shlex.quote(sys.executable)} -S -E {shlex.quote(str(copy))} claude --git-wal {GIT_WAL}"
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    for event in ("PreToolUse", "PostToolUse"):
        r = hook(repo, cmd, claude_tool(repo, event, "Edit", edit, "toolu_1"))
        assert (r.returncode, r.stderr) == (0, "")  # answered by the server, not in process
        if event == "PreToolUse":
            pid = server_pid(rundir)
            (repo / "README").write_text("bye\n")
    assert server_pid(rundir) == pid and statuses(repo) == ["committed"]


@pytest.mark.slow
def test_a_killed_server_is_replaced_and_nothing_is_lost(repo: Path, rundir: Path) -> None:
    cmd = command(repo)
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    pid = server_pid(rundir)
    os.kill(pid, signal.SIGKILL)
    wait_exit(pid)
    edit_round(repo, cmd, "toolu_2", "bye", "ciao")  # a stale socket is left behind
    assert statuses(repo) == ["committed", "committed"]


def test_a_runtime_dir_others_can_enter_is_refused(repo: Path, rundir: Path) -> None:
    rundir.mkdir(mode=0o755)
    rundir.chmod(0o755)
    cmd = command(repo)
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    r = hook(repo, cmd, claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_1"))
    # The WAL rule holds: the hook ran in a process of its own instead.
    assert r.returncode == 0, r.stderr
    assert "accessible to others" in r.stderr
    assert list(rundir.iterdir()) == []  # no socket was made there
    assert statuses(repo) == ["open"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to own files as another user")
def test_another_users_socket_dir_or_socket_is_refused(repo: Path, rundir: Path) -> None:
    cmd = command(repo)
    rundir.mkdir(mode=0o700)
    os.chown(rundir, 65534, 65534)
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    r = hook(repo, cmd, claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_1"))
    assert r.returncode == 0 and "belongs to uid 65534" in r.stderr
    os.chown(rundir, 0, 0)
    # A socket in our directory that someone else made: not trusted either.
    from gitwal.agents import client

    path = client.socket_path(str(repo / ".git"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    os.chown(path, 65534, 65534)
    try:
        r = hook(repo, cmd, claude_tool(repo, "PostToolUse", "Edit", edit, "toolu_1"))
    finally:
        s.close()
    assert r.returncode == 0 and "belongs to uid 65534" in r.stderr
    assert statuses(repo) == ["committed"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_the_server_serves_no_other_user(repo: Path, rundir: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # A runtime dir another user could reach, were the permissions loosened.
    base = Path(tempfile.mkdtemp(prefix="gitwal-peer-", dir="/tmp"))
    base.chmod(0o711)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    rundir = base / "gitwal"
    cmd = command(repo)
    try:
        _serve_no_other_user(repo, cmd, rundir)
    finally:
        os.kill(server_pid(rundir), signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def _serve_no_other_user(repo: Path, cmd: str, rundir: Path) -> None:
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    [sock] = list(rundir.glob("*.sock"))
    rundir.chmod(0o711)
    sock.chmod(0o666)  # as if the permissions were loosened: SO_PEERCRED still refuses
    payload = json.dumps(claude_tool(repo, "PostToolUse", "Edit", {}, "toolu_x")).encode()
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "try:\n"
        f"    s.sendall(b'GWAL1\\nclaude\\n/\\n{len(payload)}\\n' + sys.stdin.buffer.read())\n"
        "    got = s.recv(100)\n"
        "except (ConnectionResetError, BrokenPipeError):\n"
        "    got = b''\n"
        "sys.stdout.write(repr(got))\n"
    )
    proc = subprocess.run(["python3", "-c", probe, str(sock)], input=payload,
                          capture_output=True, user=65534)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"b''"  # closed without an answer
    assert len(statuses(repo)) == 1


def test_gitwal_no_server_runs_in_process(repo: Path, rundir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITWAL_NO_SERVER", "1")
    cmd = command(repo)
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    assert statuses(repo) == ["committed"]
    assert not rundir.exists() or not list(rundir.glob("*.sock"))


@pytest.mark.slow
def test_the_server_checks_the_whole_tree_after_a_call(repo: Path, rundir: Path) -> None:
    cmd = command(repo)
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    (repo / "stray.txt").write_text("made by something else\n")
    edit = {"file_path": str(repo / "README"), "old_string": "bye", "new_string": "ciao"}
    pre = hook(repo, cmd, claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_2"))
    assert pre.returncode == 0
    (repo / "README").write_text("ciao\n")
    post = hook(repo, cmd, claude_tool(repo, "PostToolUse", "Edit", edit, "toolu_2"))
    assert post.returncode == 0
    # The check runs after the answer, in the server: poll the log for its record.
    deadline = time.monotonic() + 20
    found = [r for r in wal_log(repo, RUN) if r["type"] == "unlogged"]
    while time.monotonic() < deadline and not found:
        time.sleep(0.2)
        found = [r for r in wal_log(repo, RUN) if r["type"] == "unlogged"]
    assert found and "stray.txt" in found[0]["paths"]


@pytest.mark.slow
def test_agent_server_stop_stops_the_repositorys_server(repo: Path, rundir: Path) -> None:
    cmd = command(repo)
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    pid = server_pid(rundir)
    [lock] = list(rundir.glob("*.lock"))
    assert not lock_is_free(lock)
    out = json.loads(ok(repo, "agent-server", "--stop", "--json"))
    assert out == {"git_dir": str((repo / ".git").resolve()), "stopped": pid}
    assert lock_is_free(lock) and list(rundir.glob("*.sock")) == []  # it cleaned up
    assert not runs_agent_server(pid)
    assert ok(repo, "agent-server", "--stop") == "no hook server runs for this repository\n"
    # The next hook call starts a new one; nothing was lost.
    edit_round(repo, cmd, "toolu_2", "bye", "ciao")
    assert server_pid(rundir) != pid
    assert statuses(repo) == ["committed", "committed"]


def test_agent_server_stop_outside_a_repository_is_a_usage_error(tmp_path: Path,
                                                                 rundir: Path) -> None:
    proc = wal(tmp_path, "agent-server", "--stop")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: not in a git working tree") and "hint:" in proc.stderr
    proc = wal(tmp_path, "agent-server", "--all")
    assert proc.returncode == 2 and "--all goes with --stop" in proc.stderr


@pytest.mark.slow
def test_server_idle_time_comes_from_git_config(repo: Path, rundir: Path) -> None:
    subprocess.run(["git", "config", "wal.agent.serverIdle", "0.5"], cwd=repo, check=True)
    cmd = command(repo)
    edit_round(repo, cmd, "toolu_1", "hello", "bye")
    [lock] = list(rundir.glob("*.lock"))
    wait_exit(server_pid(rundir), 60)  # it retires on its own, long before this
    assert lock_is_free(lock) and list(rundir.glob("*.sock")) == []
