"""Run logs on remotes: `git wal push/fetch/remote setup` against real servers.

One server is a bare repository served by a real `git daemon` process on
127.0.0.1 (receive-pack enabled, gitwal's pre-receive hook installed); the
other is a plain file:// remote.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, wal


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _bare(base: Path, name: str) -> Path:
    """A bare server holding a `main` branch, with gitwal's server hook."""
    server = base / name
    git(base, "init", "-q", "--bare", "-b", "main", str(server))
    ok(server, "hooks", "install")
    seed = init_repo(base / f"seed-{name}")
    git(seed, "push", "-q", str(server), "main")
    return server


@pytest.fixture
def daemon_url(tmp_path: Path) -> Iterator[str]:
    """git://127.0.0.1:<port>/logs.git, served by a `git daemon` killed at teardown."""
    base = tmp_path / "served"
    base.mkdir()
    _bare(base, "logs.git")
    for _attempt in range(3):  # another process may take the free port before we bind it
        port = _free_port()
        proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
             f"--base-path={base}", "--export-all", "--enable=receive-pack",
             "--informative-errors", str(base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(200):  # up to ~10 s on a loaded machine
            if proc.poll() is not None or _listening(port):
                break
            time.sleep(0.05)
        if proc.poll() is None and _listening(port):
            break
        proc.kill()
        proc.wait()
    else:
        pytest.fail("git daemon did not start")
    try:
        yield f"git://127.0.0.1:{port}/logs.git"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


@pytest.fixture(params=["daemon", "file"])
def server_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "daemon":
        url: str = request.getfixturevalue("daemon_url")
        return url
    return (_bare(tmp_path, "plain.git")).as_uri()


def _served_dir(tmp_path: Path, url: str) -> Path:
    return tmp_path / "served" / "logs.git" if url.startswith("git://") else Path(url[7:])


def _clone(tmp_path: Path, url: str, name: str) -> Path:
    git(tmp_path, "clone", "-q", url, name)
    return tmp_path / name


def _json(repo: Path, *args: str, code: int = 0) -> dict[str, object]:
    proc = wal(repo, *args, "--json")
    assert proc.returncode == code, proc.stderr
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def _statuses(data: dict[str, object]) -> dict[str, str]:
    refs = data["refs"]
    assert isinstance(refs, list)
    return {r["ref"]: r["status"] for r in refs}


def _run_with_step(repo: Path, text: str) -> str:
    run = ok(repo, "begin", "--task", text).strip()
    ok(repo, "apply", "write-file", f"{text}.txt", "--from", "-", input=f"{text}\n".encode())
    return run


@pytest.mark.slow
def test_two_clones_push_their_runs_and_fetch_brings_both(tmp_path: Path,
                                                         server_url: str) -> None:
    a = _clone(tmp_path, server_url, "a")
    b = _clone(tmp_path, server_url, "b")
    run_a = _run_with_step(a, "from-a")
    run_b = _run_with_step(b, "from-b")
    assert _statuses(_json(a, "push")) == {f"refs/wal/{run_a}": "created"}
    assert _statuses(_json(b, "push")) == {f"refs/wal/{run_b}": "created"}
    assert _statuses(_json(a, "push")) == {f"refs/wal/{run_a}": "up-to-date"}

    fetched = _json(a, "fetch")
    assert fetched["ok"] is True and fetched["remote"] == "origin"
    assert _statuses(fetched) == {f"refs/wal/{run_a}": "up-to-date",
                                  f"refs/wal/{run_b}": "created"}
    assert _statuses(_json(b, "fetch")) == {f"refs/wal/{run_a}": "created",
                                            f"refs/wal/{run_b}": "up-to-date"}
    for repo in (a, b):
        assert git(repo, "rev-parse", f"refs/wal/{run_a}", f"refs/wal/{run_b}") == git(
            a, "rev-parse", f"refs/wal/{run_a}", f"refs/wal/{run_b}")
    assert "from-b" in ok(a, "log", "--run", run_b)

    server = _served_dir(tmp_path, server_url)
    verified = wal(server, "verify", "--all")
    assert verified.returncode == 0, verified.stdout
    assert "verified 2 run(s): all ok" in verified.stdout


@pytest.mark.slow
def test_push_picks_the_current_run_or_all_and_the_upstream_remote(tmp_path: Path) -> None:
    origin = _bare(tmp_path, "origin.git")
    backup = _bare(tmp_path, "backup.git")
    a = _clone(tmp_path, origin.as_uri(), "a")
    git(a, "remote", "add", "backup", backup.as_uri())
    first = _run_with_step(a, "first")
    second = _run_with_step(a, "second")  # now the current run
    assert _statuses(_json(a, "push")) == {f"refs/wal/{second}": "created"}
    assert _statuses(_json(a, "push", "--run", first, "backup")) == {
        f"refs/wal/{first}": "created"}

    git(a, "fetch", "-q", "backup")
    git(a, "branch", "-q", "--set-upstream-to=backup/main")
    assert _statuses(_json(a, "push", "--all")) == {f"refs/wal/{first}": "up-to-date",
                                                    f"refs/wal/{second}": "created"}
    assert git(backup, "for-each-ref", "--format=%(refname)", "refs/wal/").split() == sorted(
        [f"refs/wal/{first}", f"refs/wal/{second}"])

    missing = wal(a, "push", "nowhere")
    assert missing.returncode == 1
    assert "error: no remote named 'nowhere' (remotes here: backup, origin)" in missing.stderr
    assert "hint: name a configured remote" in missing.stderr
    both = wal(a, "push", "--run", first, "--all")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    unknown = wal(a, "push", "--run", "no-such-run")
    assert unknown.returncode == 1 and "no run no-such-run" in unknown.stderr


@pytest.mark.slow
def test_fetch_run_brings_that_run_alone(tmp_path: Path) -> None:
    url = _bare(tmp_path, "plain.git").as_uri()
    a = _clone(tmp_path, url, "a")
    b = _clone(tmp_path, url, "b")
    for run in ("x", "x2", "y"):  # x2 shares x's prefix: the live refspec matches it too
        ok(a, "begin", "--run", run, "--task", run)
        ok(a, "apply", "--run", run, "write-file", f"{run}.txt", "--from", "-",
           input=b"text\n")
        if run == "x":
            ok(a, "checkpoint", "--run", "x", "--detached")  # x gets a checkpoint ref
            ok(a, "compact", "--run", "x")  # and an archive
    ok(a, "push", "--all")
    x_refs = git(a, "for-each-ref", "--format=%(refname)", "refs/wal/x", "refs/wal-archive/x",
                 "refs/wal-checkpoints/x").split()
    assert len(x_refs) == 3, x_refs

    fetched = _json(b, "fetch", "--run", "x")
    assert _statuses(fetched) == dict.fromkeys(x_refs, "created")
    assert git(b, "for-each-ref", "--format=%(refname)", "refs/wal/", "refs/wal-archive/",
               "refs/wal-checkpoints/").split() == x_refs
    for ref in x_refs:
        assert git(b, "rev-parse", ref) == git(a, "rev-parse", ref)
    # The rest comes with a plain fetch; x is up to date.
    assert _statuses(_json(b, "fetch")) == {**dict.fromkeys(x_refs, "up-to-date"),
                                            "refs/wal/x2": "created", "refs/wal/y": "created"}


def test_fetch_run_of_a_run_the_remote_lacks_is_an_error(tmp_path: Path) -> None:
    url = _bare(tmp_path, "plain.git").as_uri()
    a = _clone(tmp_path, url, "a")
    run = _run_with_step(a, "only-here")
    head = git(a, "rev-parse", f"refs/wal/{run}")
    proc = wal(a, "fetch", "--run", "nosuch")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: remote origin has no log of run nosuch\n")
    assert "hint: `git ls-remote origin 'refs/wal/*'`" in proc.stderr
    bad = wal(a, "fetch", "--run", "../x")
    assert bad.returncode == 1 and bad.stderr.startswith("error: invalid run id '../x'")
    assert "hint:" in bad.stderr and "Traceback" not in bad.stderr
    assert git(a, "rev-parse", f"refs/wal/{run}") == head  # nothing changed


@pytest.mark.slow
def test_a_diverged_log_is_refused_on_push_and_reported_on_fetch(tmp_path: Path,
                                                                server_url: str) -> None:
    a = _clone(tmp_path, server_url, "a")
    b = _clone(tmp_path, server_url, "b")
    run = _run_with_step(a, "shared")
    ok(a, "push")
    ref = f"refs/wal/{run}"
    assert _statuses(_json(b, "fetch")) == {ref: "created"}

    # A fast-forward comes through.
    ok(a, "apply", "--run", run, "ensure-line", "shared.txt", "from a")
    ok(a, "push")
    data = _json(b, "fetch")
    assert _statuses(data) == {ref: "updated"}
    assert git(b, "rev-parse", ref) == git(a, "rev-parse", ref)

    # The same run then grows differently in two places.
    ok(a, "apply", "--run", run, "ensure-line", "shared.txt", "again from a")
    ok(a, "push")
    ok(b, "apply", "--run", run, "write-file", "b.txt", "--from", "-", input=b"b\n")
    ours = git(b, "rev-parse", ref)
    pushed = wal(b, "push", "--run", run)
    assert pushed.returncode == 1
    assert f"error: {ref}: rejected ([rejected] (fetch first))" in pushed.stderr
    assert "hint: the log on origin has appends this one lacks" in pushed.stderr
    assert "nothing was forced" in pushed.stderr

    fetched = wal(b, "fetch", "--json")
    assert fetched.returncode == 1
    [entry] = json.loads(fetched.stdout)["refs"]
    assert entry["status"] == "diverged" and "they share history up to" in entry["detail"]
    assert f"error: {ref}: diverged" in fetched.stderr
    assert f"refs/wal-remote/origin/wal/{run}" in fetched.stderr
    assert git(b, "rev-parse", ref) == ours  # never overwritten
    assert git(b, "rev-parse", f"refs/wal-remote/origin/wal/{run}") == git(a, "rev-parse", ref)
    ok(b, "log", "--run", run)

    # Our side being ahead is not a divergence.
    assert _statuses(_json(a, "fetch")) == {ref: "up-to-date"}
    ok(a, "apply", "--run", run, "ensure-line", "shared.txt", "not pushed yet")
    assert _statuses(_json(a, "fetch")) == {ref: "ahead"}


def test_the_guarded_server_refuses_a_forced_push_and_a_deletion(tmp_path: Path,
                                                                daemon_url: str) -> None:
    a = _clone(tmp_path, daemon_url, "a")
    run = _run_with_step(a, "guarded")
    ok(a, "apply", "ensure-line", "guarded.txt", "second")
    ok(a, "push")
    ref = f"refs/wal/{run}"
    server = _served_dir(tmp_path, daemon_url)
    head = git(server, "rev-parse", ref).strip()

    b = _clone(tmp_path, daemon_url, "b")
    git(b, "fetch", "-q", "origin", f"{ref}:{ref}")
    forced = subprocess.run(["git", "push", "--force", "origin", f"{ref}~1:{ref}"], cwd=b,
                            capture_output=True, text=True)
    assert forced.returncode != 0
    assert f"remote: gitwal: refusing to rewrite {ref}" in forced.stderr
    assert "a write-ahead log only grows, records would be lost." in forced.stderr
    assert "pre-receive hook declined" in forced.stderr
    # A rewritten chain: the newest append replaced by another one.
    tree = git(b, "rev-parse", f"{ref}^{{tree}}").strip()
    rewritten = git(b, "commit-tree", tree, "-p", f"{ref}~1", "-m", "wal 4 rewritten").strip()
    git(b, "update-ref", ref, rewritten)
    forced = subprocess.run(["git", "push", "--force", "origin", f"{ref}:{ref}"], cwd=b,
                            capture_output=True, text=True)
    assert forced.returncode != 0
    assert (f"remote: gitwal: refusing to rewrite {ref}: {rewritten} does not extend {head}; "
            "a write-ahead log only grows, records would be lost.") in forced.stderr
    deleted = subprocess.run(["git", "push", "origin", f":{ref}"], cwd=b,
                             capture_output=True, text=True)
    assert deleted.returncode != 0
    assert f"remote: gitwal: refusing to delete {ref} (a write-ahead log)" in deleted.stderr
    assert git(server, "rev-parse", ref).strip() == head
    assert wal(server, "verify", "--all").returncode == 0


@pytest.mark.slow
def test_a_compacted_run_travels_with_its_archive(tmp_path: Path, server_url: str) -> None:
    a = _clone(tmp_path, server_url, "a")
    b = _clone(tmp_path, server_url, "b")
    run = _run_with_step(a, "compacted")
    ok(a, "checkpoint", "--detached")
    ok(a, "apply", "ensure-line", "compacted.txt", "after the checkpoint")
    ok(a, "push")
    ok(b, "fetch")
    old = git(b, "rev-parse", f"refs/wal/{run}").strip()
    ok(a, "compact")

    pushed = _statuses(_json(a, "push"))
    assert pushed[f"refs/wal/{run}"] == "compacted"
    assert pushed[f"refs/wal-archive/{run}/1"] == "created"
    server = _served_dir(tmp_path, server_url)
    assert git(server, "rev-parse", f"refs/wal-archive/{run}/1").strip() == old
    assert wal(server, "verify", "--all").returncode == 0

    fetched = _statuses(_json(b, "fetch"))
    assert fetched[f"refs/wal/{run}"] == "compacted"
    assert fetched[f"refs/wal-archive/{run}/1"] == "created"
    assert git(b, "rev-parse", f"refs/wal/{run}") == git(a, "rev-parse", f"refs/wal/{run}")
    assert ok(b, "log", "--all", "--run", run) == ok(a, "log", "--all", "--run", run)


@pytest.mark.slow
def test_remote_setup_makes_plain_push_and_fetch_carry_logs(tmp_path: Path,
                                                           server_url: str) -> None:
    a = _clone(tmp_path, server_url, "a")
    b = _clone(tmp_path, server_url, "b")
    added = json.loads(ok(a, "remote", "setup", "origin", "--json"))
    assert [(c["key"], c["value"]) for c in added if c["added"]][:2] == [
        ("remote.origin.push", "HEAD"), ("remote.origin.push", "refs/wal/*:refs/wal/*")]
    again = json.loads(ok(a, "remote", "setup", "origin", "--json"))
    assert [c for c in again if c["added"]] == []
    assert len(again) == len(added) == 7
    ok(b, "remote", "setup", "origin")

    run = _run_with_step(a, "plain")
    (a / "branch.txt").write_text("on main\n")
    git(a, "add", "branch.txt")
    git(a, "commit", "-q", "-m", "branch work")
    pushed = subprocess.run(["git", "push"], cwd=a, capture_output=True, text=True)
    assert pushed.returncode == 0, pushed.stderr
    server = _served_dir(tmp_path, server_url)
    assert git(server, "rev-parse", "main") == git(a, "rev-parse", "main")
    assert git(server, "rev-parse", f"refs/wal/{run}") == git(a, "rev-parse", f"refs/wal/{run}")

    # b has its own, different log under the same run id: plain fetch still works.
    ok(b, "begin", "--run", run, "--task", "elsewhere")
    ours = git(b, "rev-parse", f"refs/wal/{run}")
    fetched = subprocess.run(["git", "fetch"], cwd=b, capture_output=True, text=True)
    assert fetched.returncode == 0, fetched.stderr
    assert git(b, "rev-parse", "origin/main") == git(a, "rev-parse", "main")
    assert git(b, "rev-parse", f"refs/wal-remote/origin/wal/{run}") == git(
        a, "rev-parse", f"refs/wal/{run}")
    assert git(b, "rev-parse", f"refs/wal/{run}") == ours
    offline = wal(b, "fetch", "--offline", "--json")
    assert offline.returncode == 1
    assert _statuses(json.loads(offline.stdout)) == {f"refs/wal/{run}": "diverged"}

    c = _clone(tmp_path, server_url, "c")
    ok(c, "remote", "setup", "origin")
    git(c, "fetch", "-q")
    assert not git(c, "for-each-ref", "refs/wal/")
    assert _statuses(_json(c, "fetch", "--offline")) == {f"refs/wal/{run}": "created"}


def test_fetch_does_not_resurrect_a_dropped_run(tmp_path: Path) -> None:
    origin = _bare(tmp_path, "origin.git")
    a = _clone(tmp_path, origin.as_uri(), "a")
    run = _run_with_step(a, "dropped")
    ok(a, "push")
    ok(a, "drop", run)
    data = _json(a, "fetch")
    assert _statuses(data) == {f"refs/wal/{run}": "dropped"}
    assert not git(a, "for-each-ref", f"refs/wal/{run}")
    assert os.path.exists(a / ".git")  # nothing else touched


def test_push_reports_an_unreachable_remote(tmp_path: Path) -> None:
    a = init_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", (tmp_path / "missing.git").as_uri())
    _run_with_step(a, "lonely")
    pushed = wal(a, "push")
    assert pushed.returncode == 1
    assert pushed.stderr.startswith("error: git push to origin failed:")
    assert "nothing was pushed" in pushed.stderr
    fetched = wal(a, "fetch")
    assert fetched.returncode == 1 and "no local log was changed" in fetched.stderr
    assert "Traceback" not in pushed.stderr + fetched.stderr
