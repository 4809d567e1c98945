"""`git wal resume`: a run taken over in another clone from its remote, and
the clone that lost it fenced (docs/remote-runs.md, "Taking a run over"),
against real git servers (tests/gitservers.py).

"Lose the machine": its step SIGKILLed at a crash point, its pusher
SIGKILLed, its directory deleted. "Cut off": its remote's URL pointed at a
port nothing listens on, its directory kept, then pointed back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest

from .conftest import GIT_WAL, git, init_repo, ok, tree_of, wait_exit, wal
from .gitservers import GitServer, HttpGitServer
from .test_json_schema import check
from .test_remote_replication import (
    Setup,
    _pusher_pid,
    _setup,
    local_head,
    remote,
    remote_head,
    subjects,
    until,
)

STEPS = ("write a.txt", "write b.txt", "write c.txt", "write d.txt")
TEXTS = {1: ("a.txt", "alpha\n"), 2: ("b.txt", "beta\n"), 3: ("c.txt", "gamma\n"),
         4: ("d.txt", "delta\n")}
DEAD_URL = "http://127.0.0.1:9/nothing.git"  # the discard port: nothing answers


@pytest.fixture
def http(http_git_server: HttpGitServer, tmp_path: Path) -> Iterator[Setup]:
    yield from _setup(http_git_server, tmp_path)


def _begin(clone: Path) -> str:
    return ok(clone, "begin", "--task", "four files", *[a for s in STEPS for a in ("--step", s)]
              ).strip()


def _step(clone: Path, n: int, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    path, text = TEXTS[n]
    return wal(clone, "apply", "--step", str(n), "write-file", path, "--from", "-",
               input=text.encode(), env=env)


def _clone(s: Setup, name: str) -> Path:
    path = s.base / name
    git(s.base, "clone", "-q", s.server.url("logs.git"), str(path))
    return path


def processes_in(*dirs: Path) -> list[int]:
    """Every process whose working directory is one of ``dirs`` or below (the
    pusher, a `git push` it started in a session of its own; an agent's hook
    server)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue  # gone (a zombie has none), or not ours to read
        if any(cwd == d or d in cwd.parents for d in dirs):
            out.append(int(entry.name))
    return out


def _kill_machine(clone: Path) -> None:
    """SIGKILL every process of ``clone`` (its pusher and what it started)
    and delete its directory."""
    pid = _pusher_pid(clone)
    pids = set(processes_in(clone)) | ({pid} if pid is not None else set())
    while pids:  # again: one may have started a git (a fetch, a push) meanwhile
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            wait_exit(pid)
        pids = set(processes_in(clone))
    shutil.rmtree(clone)


def _records(clone: Path, run: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(clone, "log", "--run", run, "--json").splitlines()]


def _committed_steps(clone: Path, run: str) -> list[int]:
    recs = _records(clone, run)
    intents = {r["lsn"]: r for r in recs if r["type"] == "intent"}
    return sorted(intents[r["intent"]]["step"] for r in recs if r["type"] == "commit")


@pytest.mark.slow
def test_a_lost_machine_s_run_goes_on_in_a_fresh_clone(git_server: GitServer,
                                                        tmp_path: Path) -> None:
    s = next(_setup(git_server, tmp_path))
    git(s.clone, "config", "wal.remote.durability", "commit")
    run = _begin(s.clone)
    for n in (1, 2):
        assert _step(s.clone, n).stdout.endswith(": committed\n")
    killed = _step(s.clone, 3, env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL or killed.returncode == 128 + 9
    # The open intent reaches the remote in the background: wait for it, then
    # lose the machine (its pusher killed, its directory gone).
    head = local_head(s.clone, run)
    until("the intent on the remote", lambda: remote_head(s.bare, run) == head)
    _kill_machine(s.clone)

    other = _clone(s, "other")
    proc = wal(other, "resume", run, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = check(json.loads(proc.stdout), "resume")
    assert doc["closed"]["outcome"] == "not-applied" and doc["closed"]["target"] == ["c.txt"]
    assert sorted(doc["written"]) == ["a.txt", "b.txt"]
    assert (other / "a.txt").read_text() == "alpha\n" and not (other / "c.txt").exists()
    assert "redo LSN" in doc["prompt"] and "c.txt" in doc["prompt"]
    # The takeover is on the remote, after every record the lost machine pushed.
    assert remote_head(s.bare, run) == local_head(other, run)
    assert subjects(s.bare, f"refs/wal/{run}")[0].startswith(f"wal {doc['takeover']} takeover")
    # The run goes on here (it is current, bound to this worktree) to the end.
    for n in (3, 4):
        assert _step(other, n).returncode == 0
    assert _committed_steps(other, run) == [1, 2, 3, 4]  # each plan step committed once
    ok(other, "verify", "--run", run)
    # Byte-identical to the same run never interrupted.
    straight = init_repo(tmp_path / "straight", {"a.txt": "0\n"})
    _begin(straight)
    for n in (1, 2, 3, 4):
        assert _step(straight, n).returncode == 0
    assert tree_of(other) == tree_of(straight)


@pytest.mark.slow
def test_the_cut_off_machine_is_fenced_and_loses_nothing(http: Setup) -> None:
    s = http
    run = _begin(s.clone)
    assert _step(s.clone, 1).returncode == 0
    until("on the remote", lambda: remote(s.clone)["behind"] == 0)
    git(s.clone, "remote", "set-url", "origin", DEAD_URL)  # cut off
    assert _step(s.clone, 2).returncode == 0  # async: the step goes on, not pushed
    mine = local_head(s.clone, run)

    other = _clone(s, "other")
    ok(other, "resume", run)
    taker = next(r for r in _records(other, run) if r["type"] == "takeover")
    assert (other / "a.txt").read_text() == "alpha\n" and not (other / "b.txt").exists()
    assert _step(other, 2).returncode == 0
    theirs = local_head(other, run)

    # Appended here while still cut off (the pusher, retrying, could otherwise
    # meet the takeover first and fence the clone before this step).
    assert _step(s.clone, 3).returncode == 0
    git(s.clone, "remote", "set-url", "origin", s.server.url("logs.git"))  # back
    # The pusher's retry is refused: the remote's head forks from this log.
    until("fenced", lambda: "taken over" in (remote(s.clone)["error"] or ""))
    refused = wal(s.clone, "apply", "write-file", "d.txt", "--from", "-", input=b"x\n")
    assert refused.returncode == 6, refused.stderr
    assert f"clone {taker['clone']}" in refused.stderr and "hint: " in refused.stderr
    assert not (s.clone / "d.txt").exists()
    # The remote's log did not fork; the fenced clone lost nothing.
    assert remote_head(s.bare, run) == theirs
    assert git(s.clone, "merge-base", "--is-ancestor", mine, f"refs/wal/{run}") == ""
    fenced_head = local_head(s.clone, run)
    assert len(subjects(s.clone, fenced_head)) == len(subjects(s.clone, mine)) + 2

    # Taking it back keeps the fenced appends in refs/wal-fenced/<run>/1.
    proc = wal(s.clone, "resume", run)
    assert proc.returncode == 0, proc.stderr
    kept = git(s.clone, "rev-parse", f"refs/wal-fenced/{run}/1").strip()
    assert kept == fenced_head
    assert (s.clone / "b.txt").read_text() == "beta\n"
    assert _step(s.clone, 4).returncode == 0
    until("on the remote", lambda: remote(s.clone)["behind"] == 0)
    assert git(s.bare, "merge-base", "--is-ancestor", theirs, f"refs/wal/{run}") == ""


def test_resume_refuses_work_it_did_not_write_and_takes_nothing(http: Setup) -> None:
    s = http
    run = _begin(s.clone)
    assert _step(s.clone, 1).returncode == 0
    until("on the remote", lambda: remote(s.clone)["behind"] == 0)
    before = remote_head(s.bare, run)
    other = _clone(s, "other")
    (other / "a.txt").write_text("someone's work\n")
    proc = wal(other, "resume", run)
    assert proc.returncode == 1
    assert "error: " in proc.stderr and "a.txt" in proc.stderr and "hint: " in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (other / "a.txt").read_text() == "someone's work\n"
    assert remote_head(s.bare, run) == before  # nothing was taken over
    # The first machine goes on as before.
    assert _step(s.clone, 2).returncode == 0


def test_resume_errors(http: Setup) -> None:
    s = http
    other = _clone(s, "other")
    for args, words in ((("resume", "no-such-run"), "has no log of run no-such-run"),
                        (("resume", "x", "--remote", "nowhere"), "nowhere"),
                        (("resume", "../bad"), "invalid run id")):
        proc = wal(other, *args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert words in proc.stderr and "hint: " in proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_two_clones_racing_to_resume_leave_one_chain(http: Setup) -> None:
    s = http
    run = _begin(s.clone)
    assert _step(s.clone, 1).returncode == 0
    until("on the remote", lambda: remote(s.clone)["behind"] == 0)
    clones = [_clone(s, f"c{i}") for i in range(2)]
    procs = [subprocess.Popen([GIT_WAL, "resume", run], cwd=c, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in clones]
    results = [(p.wait(timeout=300), p.communicate()[1]) for p in procs]
    assert any(code == 0 for code, _ in results), results
    head = remote_head(s.bare, run)
    assert head is not None
    taken = [line for line in subjects(s.bare, head) if " takeover " in line]
    assert 1 <= len(taken) == sum(code == 0 for code, _ in results)
    for clone, (code, err) in zip(clones, results, strict=True):
        if code != 0:  # lost the race: nothing of it stayed, here or there
            assert "moved after it was fetched" in err or "moved while" in err, err
            assert git(s.bare, "merge-base", "--is-ancestor", local_head(clone, run),
                       head) == ""


@pytest.mark.slow
def test_an_open_shell_step_is_in_doubt_after_a_takeover(http: Setup) -> None:
    s = http
    git(s.clone, "config", "wal.remote.durability", "commit")
    run = _begin(s.clone)
    assert _step(s.clone, 1).returncode == 0
    killed = wal(s.clone, "exec", "--", "sh", "-c", "echo made > e.txt",
                 env={"GITWAL_CRASH_AT": "after-exec"})
    assert killed.returncode != 0 and (s.clone / "e.txt").exists()  # it ran, then died
    head = local_head(s.clone, run)
    until("the intent on the remote", lambda: remote_head(s.bare, run) == head)
    _kill_machine(s.clone)
    other = _clone(s, "other")
    doc = check(json.loads(ok(other, "resume", run, "--json")), "resume")
    assert doc["closed"]["outcome"] == "in-doubt" and doc["closed"]["tool"] == "exec"
    assert not (other / "e.txt").exists()  # the tree is at the step's pre-image here
    abort = next(r for r in _records(other, run) if r["type"] == "abort")
    assert "outside the working tree is not known" in abort["reason"]
    assert "git wal exec" in doc["prompt"]


def test_a_script_a_shell_step_made_executable_is_executable_after_resume(
        http: Setup) -> None:
    s = http
    run = _begin(s.clone)
    ok(s.clone, "exec", "--", "sh", "-c", "printf 'echo hi\\n' > run.sh && chmod +x run.sh")
    assert _step(s.clone, 1).returncode == 0
    head = local_head(s.clone, run)
    until("on the remote", lambda: remote_head(s.bare, run) == head)
    _kill_machine(s.clone)
    other = _clone(s, "other")
    doc = check(json.loads(ok(other, "resume", run, "--json")), "resume")
    assert sorted(doc["written"]) == ["a.txt", "run.sh"]
    assert (other / "run.sh").read_text() == "echo hi\n"
    assert os.stat(other / "run.sh").st_mode & 0o111  # not 0644: the step's own mode
    assert os.stat(other / "a.txt").st_mode & 0o111 == 0


def test_a_fenced_clone_takes_its_run_back_over_its_own_shell_steps_paths(
        http: Setup) -> None:
    s = http
    run = _begin(s.clone)
    assert _step(s.clone, 1).returncode == 0
    until("on the remote", lambda: remote(s.clone)["behind"] == 0)
    git(s.clone, "remote", "set-url", "origin", DEAD_URL)  # cut off
    ok(s.clone, "exec", "--", "sh", "-c", "echo mine > b.txt")  # logged here only
    other = _clone(s, "other")
    ok(other, "resume", run)
    assert _step(other, 2).returncode == 0  # the taker sets b.txt too
    git(s.clone, "remote", "set-url", "origin", s.server.url("logs.git"))  # back
    until("fenced", lambda: "taken over" in (remote(s.clone)["error"] or ""))
    # b.txt holds what this clone's own shell step wrote: bytes its log keeps
    # (in refs/wal-fenced/<run>/1 after the takeback), so resume may write it.
    proc = wal(s.clone, "resume", run)
    assert proc.returncode == 0, proc.stderr
    assert (s.clone / "b.txt").read_text() == "beta\n"
    kept = git(s.clone, "rev-list", "--objects", f"refs/wal-fenced/{run}/1")
    assert str(pygit2.hash(b"mine\n")) in kept  # what it overwrote is kept
