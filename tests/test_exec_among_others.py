"""A shell step among other runs (docs/agents-together.md, "Shell steps among
other runs"): another run's step committed while a shell step runs is not the
shell step's effect (history, `git wal order`, undo, verify, recovery), and a
shell step that changes another run's claimed path says so.

Real `git wal` processes; the shell step's command waits on a fifo while the
other run works, so the interleaving is fixed without sleeping.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .conftest import GIT_WAL, git, ok, wal
from .test_agent_payloads import claude_run, claude_tool, run_hook, wal_log
from .test_json_schema import check
from .test_many_runs import paused, start_apply

S1 = "33333333-0b7d-4c1e-9a55-2f4d6c8e1b23"


def fifos(tmp_path: Path) -> tuple[Path, Path]:
    started, go = tmp_path / "started", tmp_path / "go"
    os.mkfifo(started)
    os.mkfifo(go)
    return started, go


def start_exec(repo: Path, run: str, started: Path, go: Path,
               **popen: Any) -> subprocess.Popen[bytes]:
    """`git wal exec` whose command writes a.txt, says it started, waits for
    ``go``, then appends to a.txt (``read`` is sh's own: no child process)."""
    script = (f"echo A > a.txt; echo up > '{started}'; read x < '{go}'; "
              "echo A2 >> a.txt")
    return subprocess.Popen([GIT_WAL, "exec", "--run", run, "--", "sh", "-c", script],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **popen)


def _fifo(path: Path, mode: str, proc: subprocess.Popen[bytes]) -> None:
    """Open ``path`` (a fifo) for ``mode`` and read or write one line; fails
    instead of hanging if ``proc`` never comes to the other end."""
    done: list[bool] = []

    def go() -> None:
        with open(path, mode) as f:
            if mode == "r":
                f.read()
            else:
                f.write("go\n")
        done.append(True)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(60)
    if not done:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the command never reached the fifo: {err.decode()}")


def exec_around(repo: Path, tmp_path: Path, during: Callable[[], object]) -> None:
    """Run A's `git wal exec` (start_exec), run ``during`` while its command
    waits on the fifo, then let it finish; it must exit 0."""
    started, go = fifos(tmp_path)
    a = start_exec(repo, "run-a", started, go)
    _fifo(started, "r", a)
    during()
    _fifo(go, "w", a)
    _, err = a.communicate(timeout=60)
    assert a.returncode == 0, err.decode()


@contextlib.contextmanager
def reaped(*procs: subprocess.Popen[bytes]) -> Iterator[None]:
    """Kill (with their commands) the steps a failed assertion left waiting on a
    fifo: a failing test must not leave processes behind. Each was started in a
    session of its own."""
    try:
        yield
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def record(repo: Path, run: str, kind: str) -> list[dict[str, Any]]:
    return [r for r in wal_log(repo, run) if r["type"] == kind]


def order_json(repo: Path) -> dict[str, Any]:
    proc = wal(repo, "order", "--json")
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    check(data, "order")
    return data


def verified(repo: Path, *runs: str) -> None:
    for run in runs:
        proc = wal(repo, "verify", "--run", run)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_another_runs_commit_while_a_shell_step_runs_is_not_its_effect(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    # While A's command runs, B changes another path, committed.
    exec_around(repo, tmp_path, lambda: ok(repo, "apply", "--run", "run-b", "write-file",
                                           "b.txt", input=b"B\n"))

    [intent] = record(repo, "run-a", "intent")
    assert intent["args"]["others"] == {"run-b": 1}  # B's newest LSN when A began
    [commit] = record(repo, "run-a", "commit")
    assert commit["theirs"] == [["b.txt", "run-b", 2]]  # B's step, LSN 2
    assert "claimed" not in commit

    found = order_json(repo)
    assert found["ok"], found
    assert found["conflicts"] == [] and found["replay_differs"] == []
    assert {(s["run"], s["lsn"]): s["paths"] for s in found["steps"]} == {
        ("run-a", 2): ["a.txt"], ("run-b", 2): ["b.txt"]}
    assert found["claimed"] == []
    shown = ok(repo, "show", "--run", "run-a", "--no-pager", "2")
    assert "a.txt" in shown and "b.txt" not in shown
    verified(repo, "run-a", "run-b")

    # Undoing A's step puts back A's path only: B's work stays.
    ok(repo, "undo", "--run", "run-a")
    assert not (repo / "a.txt").exists()
    assert (repo / "b.txt").read_text() == "B\n"
    assert order_json(repo)["ok"]
    verified(repo, "run-a", "run-b")


def test_another_runs_file_step_in_flight_at_the_closing_is_theirs(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    started, go = fifos(tmp_path)
    hold = tmp_path / "hold"
    os.mkfifo(hold)
    a = start_exec(repo, "run-a", started, go)
    _fifo(started, "r", a)
    # B's step has written b.txt and not yet appended its commit when A closes.
    b = start_apply(repo, "run-b", "b.txt", b"B\n", "after-apply", hold)
    with paused(b, hold):
        _fifo(go, "w", a)
        _, err = a.communicate(timeout=60)
        assert a.returncode == 0, err.decode()
    _, err = b.communicate(timeout=60)
    assert b.returncode == 0, err.decode()
    [commit] = record(repo, "run-a", "commit")
    assert commit["theirs"] == [["b.txt", "run-b", 2]]
    assert order_json(repo)["ok"]
    verified(repo, "run-a", "run-b")


def test_a_path_the_command_changed_after_the_other_run_stays_the_shell_steps(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    # The command writes a.txt again after B's step: the post tree holds A's bytes there.
    exec_around(repo, tmp_path, lambda: ok(repo, "apply", "--run", "run-b", "write-file",
                                           "a.txt", input=b"B\n"))
    assert (repo / "a.txt").read_text() == "B\nA2\n"
    [commit] = record(repo, "run-a", "commit")
    assert "theirs" not in commit  # neither B's post nor left alone: A's change


def test_a_shell_step_on_another_runs_claimed_path_is_reported(repo: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    ok(repo, "claim", "--run", "run-b", "c.txt", "d/*")
    # A shell step cannot be refused before it runs (its paths are not known):
    # what it changed on claimed paths is named in its closing record.
    ok(repo, "exec", "--run", "run-a", "--", "sh", "-c",
       "mkdir -p d; echo x > c.txt; echo y > d/e; echo z > free.txt")
    [commit] = record(repo, "run-a", "commit")
    assert commit["claimed"] == [["c.txt", "run-b", 2], ["d/e", "run-b", 2]]
    found = order_json(repo)
    assert sorted((c["run"], c["lsn"], c["path"], c["claimed_by"], c["claim_lsn"])
                  for c in found["claimed"]) == [("run-a", 2, "c.txt", "run-b", 2),
                                                 ("run-a", 2, "d/e", "run-b", 2)]
    text = wal(repo, "order")
    assert "claimed: run run-a LSN 2 changed c.txt, claimed by run run-b (LSN 2)" \
        in text.stderr
    verified(repo, "run-a", "run-b")
    # Once released, nothing is claimed any more.
    ok(repo, "release", "--run", "run-b")
    ok(repo, "exec", "--run", "run-a", "--", "sh", "-c", "echo w > c.txt")
    assert "claimed" not in record(repo, "run-a", "commit")[-1]


def test_an_agents_shell_call_leaves_out_another_runs_commit(repo: Path) -> None:
    ok(repo, "begin", "--run", "run-b")
    bash = {"command": "make a.txt", "description": "build"}
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", bash, "toolu_1",
                                               session=S1))
    assert pre.code == 0, pre.err
    # While the agent's command runs, run B commits b.txt; the command writes a.txt.
    ok(repo, "apply", "--run", "run-b", "write-file", "b.txt", input=b"B\n")
    (repo / "a.txt").write_text("A\n")
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Bash", bash, "toolu_1",
                                                session=S1))
    assert post.code == 0, post.err
    a = claude_run(S1)
    [commit] = record(repo, a, "commit")
    assert commit["theirs"] == [["b.txt", "run-b", 2]]
    found = order_json(repo)
    assert found["ok"], found
    assert {(s["run"], s["lsn"]): s["paths"] for s in found["steps"]}[(a, 2)] == ["a.txt"]
    # The next call finds the tree as the log expects: nothing unlogged.
    bash2 = {"command": "true", "description": "nothing"}
    for event in ("PreToolUse", "PostToolUse"):
        assert run_hook(repo, "claude", claude_tool(repo, event, "Bash", bash2, "toolu_2",
                                                    session=S1)).code == 0
    assert record(repo, a, "unlogged") == []
    verified(repo, a, "run-b")


def test_recovery_of_a_killed_shell_step_leaves_another_runs_commit_alone(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    started, go = fifos(tmp_path)
    a = start_exec(repo, "run-a", started, go, start_new_session=True)
    _fifo(started, "r", a)
    ok(repo, "apply", "--run", "run-b", "write-file", "b.txt", input=b"B\n")
    os.killpg(a.pid, signal.SIGKILL)  # gitwal and its command, mid-command
    a.communicate(timeout=60)
    # The command's lock goes with its last holder: taken here, the command is gone.
    lock = repo / ".git" / "wal" / "locks" / "run-a.2.cmd"
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.close(fd)

    left = wal(repo, "recover", "--run", "run-a", "--json")
    [outcome] = json.loads(left.stdout)["intents"]
    assert (outcome["outcome"], outcome["action"]) == ("in-doubt", "left-open"), outcome
    assert outcome["changed"] == ["a.txt"], outcome  # b.txt is run B's
    assert (repo / "b.txt").read_text() == "B\n"
    restored = wal(repo, "recover", "--run", "run-a", "--restore", "--json")
    [outcome] = json.loads(restored.stdout)["intents"]
    assert outcome["action"] == "restored", outcome
    assert outcome["changed"] == ["a.txt"]
    assert not (repo / "a.txt").exists()
    assert (repo / "b.txt").read_text() == "B\n"
    [abort] = record(repo, "run-a", "abort")
    assert abort["restored"] == ["a.txt"]
    assert abort["theirs"] == [["b.txt", "run-b", 2]]
    assert order_json(repo)["ok"]
    verified(repo, "run-a", "run-b")


def test_verify_refuses_a_theirs_entry_the_other_log_does_not_bear_out(
        repo: Path, tmp_path: Path) -> None:
    import dataclasses

    import pygit2

    from gitwal.base.ids import RunId
    from gitwal.log.store import Store
    from gitwal.records.model import Commit, Intent, Record
    from gitwal.together.shell_among import check_named

    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    exec_around(repo, tmp_path, lambda: ok(repo, "apply", "--run", "run-b", "write-file",
                                           "b.txt", input=b"B\n"))
    r = pygit2.Repository(str(repo))
    mine, theirs = (Store(r, RunId(n)).records() for n in ("run-a", "run-b"))
    assert check_named(r, "run-a", mine, lambda run: theirs) == []

    def problems(records: list[Record], other: list[Record] | None) -> list[str]:
        return [f.reason for f in check_named(r, "run-a", records, lambda run: other)]

    # B's log does not hold that step, or it closed before A's intent noted B.
    assert any("no step there" in p
               for p in problems(mine, [x for x in theirs if not isinstance(x, Intent)]))
    late = [dataclasses.replace(x, args={**x.args, "others": {"run-b": 3}})
            if isinstance(x, Intent) and x.tool == "exec" else x for x in mine]
    assert any("closed (LSN 3) before the intent" in p for p in problems(late, theirs))
    notes: list[str] = []
    assert check_named(r, "run-a", mine, lambda run: None, notes) == []
    assert notes and "names run run-b, whose log cannot be read here" in notes[0]
    # A claim entry that names no claim.
    forged = [dataclasses.replace(x, claimed=(("a.txt", "run-b", 2),))
              if isinstance(x, Commit) else x for x in mine]
    assert any("no claim of it" in p for p in problems(forged, theirs))


def test_theirs_and_claimed_are_validated_on_read() -> None:
    import dataclasses

    import pytest

    from gitwal.base.errors import CorruptLog
    from gitwal.base.ids import Lsn, RunId
    from gitwal.records.codec import decode, encode
    from gitwal.records.model import Commit

    plain = Commit(RunId("run-a"), Lsn(3), Lsn(2), ("a" * 40,), "exit 0")
    good = dataclasses.replace(plain, theirs=(("b.txt", "run-b", 2),),
                               claimed=(("c.txt", "run-b", 4),))
    assert decode(encode(good), "x") == good
    assert b"theirs" not in encode(plain) and b"claimed" not in encode(plain)
    body = json.loads(encode(good))
    for bad in ([], [["b.txt", "run-a", 2]], [["../b", "run-b", 2]], [["b.txt", "run-b", 0]],
                [["b.txt", "run-b"]], [["b.txt", "run-b", 2], ["b.txt", "run-c", 3]]):
        with pytest.raises(CorruptLog):
            decode(json.dumps({**body, "theirs": bad}).encode(), "x")


def test_runs_bound_to_another_worktree_are_not_noted(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other))
    ok(other, "begin", "--run", "run-w")
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    ok(repo, "exec", "--run", "run-a", "--", "sh", "-c", "echo x > a.txt")
    [intent] = record(repo, "run-a", "intent")
    assert intent["args"]["others"] == {"run-b": 1}


def test_a_restore_leaves_what_another_runs_open_shell_step_changed(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    killed = wal(repo, "exec", "--run", "run-a", "--", "sh", "-c", "echo A > a.txt",
                 env={"GITWAL_CRASH_AT": "after-exec"})
    assert killed.returncode == -9 and (repo / "a.txt").read_text() == "A\n"
    started, go = fifos(tmp_path)
    # B's shell step starts after A's command ran, writes b.txt, and waits:
    # its intent is open, b.txt in no snapshot of A's.
    b = subprocess.Popen([GIT_WAL, "exec", "--run", "run-b", "--", "sh", "-c",
                          f"echo B > b.txt; echo up > '{started}'; read x < '{go}'"],
                         cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    with reaped(b):
        _fifo(started, "r", b)
        report = json.loads(ok(repo, "recover", "--run", "run-a", "--restore", "--json"))
        [step] = report["intents"]
        assert step["action"] == "restored", step
        assert "b.txt (maybe changed by run run-b's shell step, LSN 2, still open)" \
            in step["detail"]
        assert not (repo / "a.txt").exists()  # A's own change, put back (and saved)
        assert (repo / "b.txt").read_text() == "B\n"  # B's, left as it is
        _fifo(go, "w", b)
        _, err = b.communicate(timeout=60)
    assert b.returncode == 0, err.decode()
    [commit] = record(repo, "run-b", "commit")
    assert commit["intent"] == 2 and (repo / "b.txt").read_text() == "B\n"
    verified(repo, "run-a", "run-b")


def test_a_failed_shell_step_leaves_what_another_runs_open_shell_step_changed(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "begin", "--run", "run-b")
    started, go = fifos(tmp_path)
    b_started, b_go = tmp_path / "b-started", tmp_path / "b-go"
    os.mkfifo(b_started)
    os.mkfifo(b_go)
    a = subprocess.Popen([GIT_WAL, "exec", "--run", "run-a", "--", "sh", "-c",
                          f"echo A > a.txt; echo up > '{started}'; read x < '{go}'; exit 1"],
                         cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    with reaped(a):
        _fifo(started, "r", a)
        # B's shell step starts while A's command waits (after A wrote a.txt)
        # and writes b.txt: A's failure must put back a.txt only.
        b = subprocess.Popen([GIT_WAL, "exec", "--run", "run-b", "--", "sh", "-c",
                              f"echo B > b.txt; echo up > '{b_started}'; read x < '{b_go}'"],
                             cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        with reaped(b):
            _fifo(b_started, "r", b)
            _fifo(go, "w", a)
            _, err = a.communicate(timeout=60)
            assert a.returncode == 1, err.decode()
            assert "left b.txt (maybe changed by run run-b's shell step, LSN 2, still open)" \
                in err.decode()
            assert not (repo / "a.txt").exists() and (repo / "b.txt").read_text() == "B\n"
            _fifo(b_go, "w", b)
            _, err = b.communicate(timeout=60)
    assert b.returncode == 0, err.decode()
    assert (repo / "b.txt").read_text() == "B\n"
    verified(repo, "run-a", "run-b")
