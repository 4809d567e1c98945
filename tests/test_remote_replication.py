"""Each append replicated to the run's remote as it is written (docs/remote-runs.md),
against real git servers (tests/gitservers.py): in order, batched, through a
partition (the server stopped and started again on its port), never forced
over another clone's chain, through a SIGKILLed pusher; and commit durability.

Waits poll `git wal status --json` (or a file a server hook writes) with a
deadline; the server's slowness is a pre-receive hook blocked on a FIFO the
test opens when it is ready.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitwal import NotOnRemote, Wal

from .conftest import git, init_repo, ok, wait_exit, wal
from .gitservers import GitServer, HttpGitServer
from .test_agent_payloads import Result, claude_run, claude_tool, run_hook, wal_log
from .test_json_schema import check

DEADLINE = 90.0  # seconds: a loaded two-core machine


@dataclass
class Setup:
    server: GitServer
    bare: Path
    clone: Path
    base: Path


def _pusher_pid(clone: Path) -> int | None:
    """The pusher serving ``clone``'s origin, while one holds its lock (a
    pusher just started writes its pid there first thing: waited for)."""
    lock = clone / ".git" / "wal" / "replica" / "origin" / "pusher.lock"
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            end = time.monotonic() + DEADLINE
            while not (text := lock.read_text().strip()):
                assert time.monotonic() < end, "a pusher holds its lock but never said its pid"
                time.sleep(0.01)
            return int(text)
        return None
    finally:
        os.close(fd)


def _stop_pusher(clone: Path) -> None:
    pid = _pusher_pid(clone)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        wait_exit(pid)


def _setup(server: GitServer, tmp_path: Path, configured: bool = True) -> Iterator[Setup]:
    bare = server.add_bare("logs.git")
    clone = init_repo(tmp_path / "clone", {"a.txt": "0\n"})
    git(clone, "remote", "add", "origin", server.url("logs.git"))
    git(clone, "push", "-q", "origin", "main")  # the runs' base commit, for verify
    if configured:
        git(clone, "config", "wal.remote", "origin")
    git(clone, "config", "wal.remote.linger", "5")
    try:
        yield Setup(server, bare, clone, tmp_path)
    finally:
        _stop_pusher(clone)


@pytest.fixture
def http(http_git_server: HttpGitServer, tmp_path: Path) -> Iterator[Setup]:
    yield from _setup(http_git_server, tmp_path)


def remote(clone: Path) -> dict[str, Any]:
    doc = json.loads(ok(clone, "status", "--json"))
    state: dict[str, Any] = doc["remote"]
    return state


def until(what: str, check: Callable[[], bool]) -> None:
    """Poll ``check`` until it holds, failing after :data:`DEADLINE` seconds."""
    end = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < end, f"still not {what} after {DEADLINE} s"
        time.sleep(0.05)


def step(clone: Path, text: str) -> None:
    ok(clone, "apply", "write-file", "a.txt", input=text.encode())


def local_head(clone: Path, run: str) -> str:
    return git(clone, "rev-parse", f"refs/wal/{run}").strip()


def remote_head(bare: Path, run: str) -> str | None:
    out = git(bare, "for-each-ref", "--format=%(objectname)", f"refs/wal/{run}").strip()
    return out or None


def subjects(repo: Path, ref: str) -> list[str]:
    return git(repo, "log", "--format=%s", ref).splitlines()


def hook(bare: Path, base: Path) -> tuple[Path, Path, Path]:
    """A pre-receive hook that counts pushes (one line each in ``log``) and
    blocks the first one (after creating ``started``) until ``go`` is written."""
    log, started, go = base / "pushes.log", base / "started", base / "go.fifo"
    os.mkfifo(go)
    script = bare / "hooks" / "pre-receive"
    script.write_text(f"""#!/bin/sh
cat >/dev/null
echo push >> '{log}'
if [ ! -e '{started}' ]; then
    : > '{started}'
    read _ < '{go}'
fi
exit 0
""")
    script.chmod(0o755)
    return log, started, go


def release(go: Path) -> None:
    """Let the blocked push through (the hook is reading the FIFO, or about to)."""
    fd = os.open(go, os.O_WRONLY)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


# -- tests -------------------------------------------------------------------------


@pytest.fixture
def unconfigured(git_server: GitServer, tmp_path: Path) -> Iterator[Setup]:
    """Each real server, and a clone with no ``wal.remote``."""
    yield from _setup(git_server, tmp_path, configured=False)


def test_async_steps_land_on_the_remote_in_order(unconfigured: Setup) -> None:
    s = unconfigured
    other = ok(s.clone, "begin", "--task", "not replicated").strip()
    run = ok(s.clone, "begin", "--task", "replicated", "--remote", "origin").strip()
    assert (s.clone / ".git" / "wal" / "remotes" / run).read_text() == "origin\n"
    for i in range(4):
        step(s.clone, f"{i}\n")
    until("on the remote", lambda: remote(s.clone)["behind"] == 0)
    assert remote_head(s.bare, run) == local_head(s.clone, run)
    assert remote_head(s.bare, other) is None  # wal.remote is unset: only its own choice
    assert subjects(s.bare, f"refs/wal/{run}") == subjects(s.clone, f"refs/wal/{run}")
    assert len(subjects(s.bare, f"refs/wal/{run}")) == 9
    # A clone of the remote verifies the log it holds.
    copy = s.base / "copy"
    git(s.base, "clone", "-q", str(s.bare), str(copy))
    git(copy, "fetch", "-q", "origin", "refs/wal/*:refs/wal/*")
    ok(copy, "verify", "--run", run)
    assert remote(s.clone) == {"name": "origin", "behind": 0, "error": None,
                               "error_at": None}
    runs = {r["run"]: r for r in json.loads(ok(s.clone, "runs", "--json"))}
    assert runs[run]["remote"]["behind"] == 0 and runs[other]["remote"] is None


def test_a_remote_slower_than_the_steps_gets_many_appends_in_one_push(http: Setup) -> None:
    log, started, go = hook(http.bare, http.base)
    run = ok(http.clone, "begin", "--task", "batched").strip()
    until("pushing the plan", started.exists)  # the first push now waits in the hook
    for i in range(8):
        step(http.clone, f"{i}\n")
    assert remote(http.clone)["behind"] >= 16
    release(go)
    until("on the remote", lambda: remote(http.clone)["behind"] == 0)
    assert remote_head(http.bare, run) == local_head(http.clone, run)
    assert len(subjects(http.bare, f"refs/wal/{run}")) == 17
    # 17 appends, 2 pushes: the plan, then the 16 appends made meanwhile at once.
    assert log.read_text().splitlines() == ["push", "push"]


@pytest.mark.slow
def test_a_partition_leaves_a_backlog_that_is_pushed_in_order_later(http: Setup) -> None:
    run = ok(http.clone, "begin", "--task", "partition").strip()
    step(http.clone, "1\n")
    until("on the remote", lambda: remote(http.clone)["behind"] == 0)
    http.server.stop()
    for i in range(3):
        step(http.clone, f"down {i}\n")  # steps go on: async never blocks a step
    until("an error", lambda: remote(http.clone)["error"] is not None)
    state = remote(http.clone)
    assert state["behind"] == 6 and state["error_at"] > 0, state
    assert "git push to origin failed" in state["error"]
    assert "last push error" in ok(http.clone, "status")
    assert len(subjects(http.bare, f"refs/wal/{run}")) == 3
    http.server.start()
    until("caught up", lambda: remote(http.clone)["behind"] == 0)
    assert remote(http.clone)["error"] is None
    assert remote_head(http.bare, run) == local_head(http.clone, run)
    assert subjects(http.bare, f"refs/wal/{run}") == subjects(http.clone, f"refs/wal/{run}")


def test_commit_durability_fails_the_step_when_the_remote_is_down(http: Setup) -> None:
    git(http.clone, "config", "wal.remote.durability", "commit")
    git(http.clone, "config", "wal.remote.timeout", "5")
    run = ok(http.clone, "begin", "--task", "durable").strip()
    step(http.clone, "1\n")
    # Committed means on the remote: no wait needed.
    assert remote_head(http.bare, run) == local_head(http.clone, run)
    http.server.stop()
    proc = wal(http.clone, "apply", "--json", "write-file", "a.txt", input=b"2\n")
    assert proc.returncode == 5, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "LSN 4 of run" in proc.stderr and "is committed here but not on the remote origin" \
        in proc.stderr
    assert "\nhint: nothing is lost" in proc.stderr
    err = json.loads(proc.stdout)
    assert err["kind"] == "NotOnRemote" and err["exit_code"] == 5
    # The API says the same: no StepResult "committed" for it.
    with pytest.raises(NotOnRemote, match=r"LSN 6 .* not on the remote origin"):
        Wal(http.clone).run().apply("write_file", path="a.txt", content=b"2b\n")
    # The steps are committed locally, nothing open, nothing lost.
    rows = [json.loads(line) for line in ok(http.clone, "log", "--json").splitlines()]
    assert [(r["lsn"], r.get("status")) for r in rows if r["type"] == "intent"] == [
        (2, "committed"), (4, "committed"), (6, "committed")]
    assert (http.clone / "a.txt").read_text() == "2b\n"
    st = json.loads(ok(http.clone, "status", "--json"))
    assert st["open"] == [] and st["remote"]["behind"] == 4 and st["remote"]["error"]
    check(st, "status")  # docs/json-schema: the remote's fields, an error set
    check(json.loads(ok(http.clone, "runs", "--json"))[0], "run_info")
    http.server.start()
    out = ok(http.clone, "apply", "write-file", "a.txt", input=b"3\n")
    assert out.strip().endswith("committed")
    assert remote_head(http.bare, run) == local_head(http.clone, run)
    assert len(subjects(http.bare, f"refs/wal/{run}")) == 9


def test_commit_durability_waits_at_most_the_timeout(http: Setup) -> None:
    _log, started, go = hook(http.bare, http.base)
    git(http.clone, "config", "wal.remote.durability", "commit")
    git(http.clone, "config", "wal.remote.timeout", "1")
    run = ok(http.clone, "begin", "--task", "slow remote").strip()
    until("pushing the plan", started.exists)  # the pusher's push waits in the hook
    begun = time.monotonic()
    proc = wal(http.clone, "apply", "write-file", "a.txt", input=b"1\n")
    assert proc.returncode == 5, proc.stderr
    assert time.monotonic() - begun < 30
    assert "not on the remote origin" in proc.stderr
    assert "within 1 s" in proc.stderr
    release(go)
    until("caught up", lambda: remote(http.clone)["behind"] == 0)
    assert remote_head(http.bare, run) == local_head(http.clone, run)


def test_a_remote_chain_from_elsewhere_is_never_forced(http: Setup, tmp_path: Path) -> None:
    other = init_repo(tmp_path / "other", {"a.txt": "0\n"})
    git(other, "remote", "add", "origin", http.server.url("logs.git"))
    ok(other, "begin", "--task", "elsewhere", "--run", "R1")
    ok(other, "apply", "write-file", "a.txt", input=b"theirs\n")
    ok(other, "push", "origin", "--run", "R1")
    theirs = remote_head(http.bare, "R1")
    assert theirs is not None
    ok(http.clone, "begin", "--task", "here", "--run", "R1")
    step(http.clone, "ours\n")
    until("an error", lambda: remote(http.clone)["error"] is not None)
    state = remote(http.clone)
    assert "does not extend" in state["error"] and "nothing was forced" in state["error"]
    assert state["behind"] == 3
    assert remote_head(http.bare, "R1") == theirs  # the remote's chain is untouched
    step(http.clone, "more\n")  # a new append tries again, and is refused again
    head = local_head(http.clone, "R1")
    kept = http.clone / ".git" / "wal" / "replica" / "origin" / "runs" / "R1.json"
    until("refused again at the new head",
          lambda: json.loads(kept.read_text()).get("error_head") == head)
    assert remote(http.clone)["behind"] == 5
    assert remote_head(http.bare, "R1") == theirs


@pytest.mark.slow
def test_a_killed_pusher_is_restarted_by_the_next_append(http: Setup) -> None:
    _log, started, go = hook(http.bare, http.base)
    run = ok(http.clone, "begin", "--task", "killed").strip()
    until("pushing the plan", started.exists)
    step(http.clone, "1\n")
    pid = _pusher_pid(http.clone)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # mid-work: its push waits in the server's hook
    wait_exit(pid)
    release(go)  # whatever the orphaned push does now, nothing may be lost
    step(http.clone, "2\n")  # finds no pusher listening: starts one
    until("caught up", lambda: remote(http.clone)["behind"] == 0)
    new = _pusher_pid(http.clone)
    assert new is not None and new != pid
    assert remote_head(http.bare, run) == local_head(http.clone, run)
    assert subjects(http.bare, f"refs/wal/{run}") == subjects(http.clone, f"refs/wal/{run}")
    assert len(subjects(http.bare, f"refs/wal/{run}")) == 5


def test_a_bad_setting_fails_before_the_step(http: Setup) -> None:
    ok(http.clone, "begin", "--task", "settings")
    git(http.clone, "config", "wal.remote.durability", "sometimes")
    proc = wal(http.clone, "apply", "write-file", "a.txt", input=b"1\n")
    assert proc.returncode == 1 and "wal.remote.durability" in proc.stderr
    git(http.clone, "config", "wal.remote.durability", "commit")
    git(http.clone, "config", "wal.remote.timeout", "nan")
    proc = wal(http.clone, "apply", "write-file", "a.txt", input=b"1\n")
    assert proc.returncode == 1 and "wal.remote.timeout" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (http.clone / "a.txt").read_text() == "0\n"
    assert json.loads(ok(http.clone, "status", "--json"))["records"] == 1


def test_a_compacted_run_is_left_to_git_wal_push_then_followed(http: Setup) -> None:
    run = ok(http.clone, "begin", "--task", "compacted").strip()
    step(http.clone, "1\n")
    ok(http.clone, "checkpoint", "-m", "one step")
    step(http.clone, "2\n")
    until("on the remote", lambda: remote(http.clone)["behind"] == 0)
    before = remote_head(http.bare, run)
    ok(http.clone, "compact")
    step(http.clone, "3\n")
    until("an error", lambda: remote(http.clone)["error"] is not None)
    state = remote(http.clone)
    assert f"run {run} was compacted here" in state["error"]
    assert f"git wal push origin --run {run}" in state["error"]
    assert remote_head(http.bare, run) == before  # not replaced by replication
    pushed = json.loads(ok(http.clone, "push", "origin", "--run", run, "--json"))
    assert any(r["ref"] == f"refs/wal/{run}" and r["status"] == "compacted"
               for r in pushed["refs"]), pushed
    step(http.clone, "4\n")  # replication follows the compacted chain from there
    until("caught up", lambda: remote(http.clone)["behind"] == 0
          and remote(http.clone)["error"] is None)
    assert remote_head(http.bare, run) == local_head(http.clone, run)


def test_a_log_holding_a_secret_is_not_replicated(http: Setup) -> None:
    """Replication asks the check `git wal push` asks: a log that keeps an
    untracked secret-looking file's bytes is not sent, and status says why."""
    git(http.clone, "config", "--unset", "wal.remote")
    git(http.clone, "config", "wal.secretDefaults", "false")  # a log written the old way
    run = ok(http.clone, "begin", "--task", "old way").strip()
    ok(http.clone, "apply", "ensure-line", ".env", "TOKEN=1")
    git(http.clone, "config", "--unset", "wal.secretDefaults")
    git(http.clone, "config", "wal.remote", "origin")
    step(http.clone, "1\n")  # an append with the remote set wakes the pusher
    until("refused", lambda: "refusing to push run" in (remote(http.clone)["error"] or ""))
    st = remote(http.clone)
    assert ".env" in st["error"] and "wal.secretPattern" in st["error"]
    assert st["behind"] > 0
    assert remote_head(http.bare, run) is None
    secret = hashlib.sha1(b"blob 8\0TOKEN=1\n").hexdigest()
    assert git(http.clone, "cat-file", "-t", secret).strip() == "blob"  # kept here
    missing = subprocess.run(["git", "cat-file", "-e", secret], cwd=http.bare)
    assert missing.returncode != 0  # never sent


def test_an_agents_step_under_commit_durability_tells_the_model_when_not_on_the_remote(
        http: Setup) -> None:
    """A hook step (Claude Code's Edit) is committed once the remote holds its
    commit; with the remote down the PostToolUse reply says so, and the step
    stays committed here."""
    git(http.clone, "config", "wal.remote.durability", "commit")
    git(http.clone, "config", "wal.remote.timeout", "5")
    target = http.clone / "a.txt"
    edit = {"file_path": str(target), "old_string": "0", "new_string": "1",
            "replace_all": False}

    def edit_call(call: str, old: str, new: str) -> Result:
        data = {**edit, "old_string": old, "new_string": new}
        pre = run_hook(http.clone, "claude", claude_tool(http.clone, "PreToolUse", "Edit",
                                                          data, call))
        assert pre.code == 0, pre.err
        target.write_text(f"{new}\n")
        return run_hook(http.clone, "claude", claude_tool(http.clone, "PostToolUse", "Edit",
                                                           data, call))

    first = edit_call("toolu_1", "0", "1")
    assert first.code == 0, first.err
    run = claude_run()
    assert remote_head(http.bare, run) == local_head(http.clone, run)  # no wait needed
    http.server.stop()
    second = edit_call("toolu_2", "1", "2")
    told = second.err + second.out
    assert "committed here but not on the remote origin" in told, told
    intents = [r for r in wal_log(http.clone, run) if r["type"] == "intent"]
    assert [r["status"] for r in intents] == ["committed", "committed"]
    assert remote_head(http.bare, run) != local_head(http.clone, run)


def test_an_unknown_wal_remote_fails_the_step_before_its_intent(http: Setup) -> None:
    run = ok(http.clone, "begin", "--task", "typo").strip()
    git(http.clone, "config", "wal.remote", "orgin")
    before = local_head(http.clone, run)
    proc = wal(http.clone, "apply", "write-file", "a.txt", input=b"1\n")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: wal.remote is 'orgin', which is no remote")
    assert "\nhint: " in proc.stderr and "Traceback" not in proc.stderr
    assert local_head(http.clone, run) == before  # nothing logged
    assert (http.clone / "a.txt").read_text() == "0\n"


def test_a_wake_file_that_is_not_a_fifo_is_kept_aside_and_replication_goes_on(
        http: Setup) -> None:
    run = ok(http.clone, "begin", "--task", "in the way").strip()
    until("on the remote", lambda: remote_head(http.bare, run) == local_head(http.clone, run))
    _stop_pusher(http.clone)
    wake = http.clone / ".git" / "wal" / "replica" / "origin" / "wake"
    wake.unlink()
    wake.write_text("someone's file\n")  # not gitwal's: never removed
    step(http.clone, "1\n")
    until("on the remote", lambda: remote_head(http.bare, run) == local_head(http.clone, run))
    [kept] = wake.parent.glob("wake.not-a-fifo.*")
    assert kept.read_text() == "someone's file\n"
