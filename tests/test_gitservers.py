"""The real git servers the remote tests use (tests/gitservers.py): git's smart
HTTP behind lighttpd, and git daemon. Plain git and `git wal push/fetch` go
through each; a stopped server refuses, and started again it serves on the
same URL."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from . import gitservers
from .conftest import git, init_repo, ok, wal
from .gitservers import GitDaemon, GitServer, HttpGitServer, ServerError
from .test_remotes import _json, _run_with_step, _statuses


def _head(repo: Path, ref: str = "main") -> str:
    return git(repo, "rev-parse", ref).strip()


def _served_repo(server: GitServer, tmp_path: Path, name: str = "logs.git",
                 wal_hooks: bool = True) -> str:
    """A bare repository on ``server`` holding a `main` branch; its URL."""
    server.add_bare(name, wal_hooks=wal_hooks)
    seed = init_repo(tmp_path / f"seed-{name}")
    git(seed, "push", "-q", server.url(name), "main")
    return server.url(name)


def _live_processes(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not exited (zombies aside)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def test_plain_git_push_fetch_and_ls_remote(git_server: GitServer, tmp_path: Path) -> None:
    bare = git_server.add_bare("plain.git", wal_hooks=False)
    url = git_server.url("plain.git")
    assert git(tmp_path, "ls-remote", url) == ""  # empty, but served

    a = init_repo(tmp_path / "a")
    git(a, "push", "-q", url, "main")
    assert git(tmp_path, "ls-remote", url, "refs/heads/main").split() == [
        _head(a), "refs/heads/main"]
    assert _head(bare) == _head(a)  # it landed in the served repository

    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", url, str(b))
    (a / "more.txt").write_text("more\n")
    git(a, "add", "more.txt")
    git(a, "commit", "-q", "-m", "more")
    git(a, "push", "-q", url, "main")
    git(b, "fetch", "-q", "origin")
    assert _head(b, "origin/main") == _head(a)


@pytest.mark.slow
def test_wal_push_and_fetch_of_a_run(git_server: GitServer, tmp_path: Path) -> None:
    url = _served_repo(git_server, tmp_path)
    a = tmp_path / "a"
    b = tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", url, str(clone))
    run = _run_with_step(a, "over-the-wire")
    ref = f"refs/wal/{run}"

    pushed = _json(a, "push")
    assert pushed["remote"] == "origin"
    assert _statuses(pushed) == {ref: "created"}
    assert git(tmp_path, "ls-remote", url, ref).split() == [_head(a, ref), ref]

    assert _statuses(_json(b, "fetch")) == {ref: "created"}
    assert _head(b, ref) == _head(a, ref)
    assert "over-the-wire" in ok(b, "log", "--run", run)
    assert _statuses(_json(a, "push")) == {ref: "up-to-date"}

    verified = wal(git_server.repos / "logs.git", "verify", "--all")
    assert verified.returncode == 0, verified.stdout
    assert "verified 1 run(s): all ok" in verified.stdout


@pytest.mark.slow
def test_a_stopped_server_fails_the_push_and_started_again_takes_it(
        git_server: GitServer, tmp_path: Path) -> None:
    url = _served_repo(git_server, tmp_path)
    a = tmp_path / "a"
    git(tmp_path, "clone", "-q", url, str(a))
    run = _run_with_step(a, "partitioned")
    port = git_server.port

    git_server.stop()
    assert not git_server.running
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port or 0)) != 0
    plain = wal(a, "push")
    assert plain.returncode == 1, plain.stdout
    assert "error: git push to origin failed: fatal: unable to" in plain.stderr
    assert "nothing was pushed" in plain.stderr
    refused = wal(a, "fetch")
    assert refused.returncode != 0 and "error:" in refused.stderr
    assert git(git_server.repos / "logs.git", "for-each-ref", "refs/wal/") == ""

    git_server.start()
    assert git_server.port == port and git_server.url("logs.git") == url
    assert _statuses(_json(a, "push")) == {f"refs/wal/{run}": "created"}
    assert git(tmp_path, "ls-remote", url, f"refs/wal/{run}").split() == [
        _head(a, f"refs/wal/{run}"), f"refs/wal/{run}"]


def test_stop_ends_every_process_of_the_server(git_server: GitServer, tmp_path: Path) -> None:
    _served_repo(git_server, tmp_path, wal_hooks=False)
    pgid = git_server.pid
    assert pgid is not None and pgid in _live_processes(pgid)
    git_server.stop()
    assert git_server.pid is None and _live_processes(pgid) == []
    git_server.stop()  # stopping a stopped server does nothing


def test_git_daemon_stop_ends_the_child_serving_a_connection(git_daemon: GitDaemon,
                                                             tmp_path: Path) -> None:
    _served_repo(git_daemon, tmp_path, wal_hooks=False)
    pgid = git_daemon.pid
    assert pgid is not None and git_daemon.port is not None
    request = b"git-upload-pack /logs.git\0host=127.0.0.1\0"
    with socket.create_connection(("127.0.0.1", git_daemon.port), timeout=30) as s:
        s.sendall(b"%04x" % (len(request) + 4) + request)
        assert s.recv(4)  # the refs come: a child (upload-pack) now waits for our wants
        assert len(_live_processes(pgid)) > 1
        git_daemon.stop()
        assert _live_processes(pgid) == []


def test_context_manager_starts_and_stops(tmp_path: Path) -> None:
    with HttpGitServer(tmp_path / "h") as http, GitDaemon(tmp_path / "d") as daemon:
        assert http.running and daemon.running and http.port != daemon.port
        for server in (http, daemon):
            server.add_bare("x.git")
            assert git(tmp_path, "ls-remote", server.url("x.git")) == ""
    assert not http.running and not daemon.running


def test_a_missing_server_program_names_make_tools(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitservers, "_find_lighttpd", lambda: None)
    with pytest.raises(ServerError, match=r"lighttpd is not installed.*`make tools`"):
        HttpGitServer(tmp_path / "h").start()
    monkeypatch.setattr(gitservers, "_exec_path", lambda: tmp_path / "no-git-core")
    with pytest.raises(ServerError, match=r"git-daemon is not installed.*`make tools`"):
        GitDaemon(tmp_path / "d").start()


@pytest.mark.parametrize("kind", [HttpGitServer, GitDaemon])
def test_a_port_taken_before_the_server_binds_it_is_passed_over(
        kind: type[GitServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1], gitservers._candidate_port()])
        monkeypatch.setattr(gitservers, "_candidate_port", lambda: next(ports))
        with kind(tmp_path / "server") as server:
            assert server.port != taken.getsockname()[1]
            server.add_bare("x.git")
            assert git(tmp_path, "ls-remote", server.url("x.git")) == ""


def test_started_again_on_a_port_taken_meanwhile_says_so(git_daemon: GitDaemon) -> None:
    git_daemon.stop()
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", git_daemon.port or 0))
        taken.listen()
        with pytest.raises(ServerError, match="Address already in use"):
            git_daemon.start()
    assert not git_daemon.running
    git_daemon.start()  # the port free again: the same URL serves
    git_daemon.add_bare("x.git")
    assert git(git_daemon.base, "ls-remote", git_daemon.url("x.git")) == ""
