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
from .test_agent_payloads import claude_run, claude_tool, run_hook, wal_log


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


# -- agent runs (hooks: the intent and the commit are two processes) --------------------

S1 = "11111111-0b7d-4c1e-9a55-2f4d6c8e1b23"
S2 = "22222222-0b7d-4c1e-9a55-2f4d6c8e1b23"


def edit(repo: Path, old: str, new: str) -> dict[str, object]:
    return {"file_path": str(repo / "README"), "old_string": old, "new_string": new,
            "replace_all": False}


def test_an_agent_edit_is_blocked_while_another_agent_run_has_the_path_open(
        repo: Path) -> None:
    first = edit(repo, "hello", "bye")
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", first, "t1",
                                               session=S1))
    assert pre.code == 0, pre.err
    # The first agent has logged its intent and not yet written: a second session's
    # Edit of the same file is blocked, with words the model can act on, even when
    # unlogged calls are allowed (running it would lose one of the two edits).
    for fail_open in ("false", "true"):
        git(repo, "config", "wal.agent.failOpen", fail_open)
        second = run_hook(repo, "claude", claude_tool(
            repo, "PreToolUse", "Edit", edit(repo, "hello", "salut"), "u1", session=S2))
        assert second.code == 2, second.err
        assert f"README is being changed by run {claude_run(S1)}" in second.err
        assert "Edit" in second.err and "nothing was changed" in second.err
        assert "read the file again and retry" in second.err
        assert not [r for r in wal_log(repo, claude_run(S2)) if r["type"] == "intent"]
    (repo / "README").write_text("bye\n")
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", first, "t1",
                                                session=S1))
    assert post.code == 0, post.err
    # The step is over: the second session reads the file again and its retry goes through.
    retry = edit(repo, "bye", "salut")
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", retry, "u2",
                                               session=S2))
    assert pre.code == 0, pre.err
    [intent] = [r for r in wal_log(repo, claude_run(S2)) if r["type"] == "intent"]
    assert intent["target"] == ["README"] and intent["status"] == "open"


def test_cli_and_agent_steps_keep_off_each_others_paths(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--task", "cli work", "--run", "run-b")
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit",
                                               edit(repo, "hello", "bye"), "t1", session=S1))
    assert pre.code == 0, pre.err
    # An agent's open intent keeps a CLI step off its path...
    before = head(repo, "run-b")
    refused = wal(repo, "apply", "--run", "run-b", "write-file", "README", input=b"B\n")
    assert refused.returncode == 1
    assert f"error: README is being changed by run {claude_run(S1)}" in refused.stderr
    assert "LSN 2 Edit" in refused.stderr and "git wal recover --run" in refused.stderr
    assert (repo / "README").read_text() == "hello\n" and head(repo, "run-b") == before
    (repo / "README").write_text("bye\n")
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit",
                                                edit(repo, "hello", "bye"), "t1",
                                                session=S1)).code == 0
    # ... and a CLI step in progress keeps an agent's call off its path.
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    cli = start_apply(repo, "run-b", "README", b"B\n", "after-intent", fifo)
    with paused(cli, fifo):
        blocked = run_hook(repo, "claude", claude_tool(
            repo, "PreToolUse", "Edit", edit(repo, "bye", "ciao"), "t2", session=S1))
        assert blocked.code == 2
        assert "README is being changed by run run-b (task 'cli work')" in blocked.err
        assert "write_file" in blocked.err
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err.decode()
    assert (repo / "README").read_text() == "B\n"
    assert not [r for r in wal_log(repo, claude_run(S1))
                if r["type"] == "intent" and r["status"] == "open"]


def test_runs_of_two_worktrees_do_not_hold_each_other_off(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other))
    ok(repo, "begin", "--run", "run-a")
    ok(other, "begin", "--run", "run-w")
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    first = start_apply(repo, "run-a", "README", b"A\n", "after-intent", fifo)
    with paused(first, fifo):
        # The same path in another working tree is another file.
        ok(other, "apply", "--run", "run-w", "write-file", "README", input=b"W\n")
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err.decode()
    assert (repo / "README").read_text() == "A\n" and (other / "README").read_text() == "W\n"


def test_an_undo_is_refused_while_another_run_writes_its_path(repo: Path,
                                                             tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "run-a")
    ok(repo, "apply", "--run", "run-a", "write-file", "README", input=b"A\n")
    ok(repo, "begin", "--run", "run-b")
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    writer = start_apply(repo, "run-b", "README", b"B\n", "after-intent", fifo)
    with paused(writer, fifo):
        before = head(repo, "run-a")
        undo = wal(repo, "undo", "--run", "run-a")
        assert undo.returncode == 1
        assert "README is being changed by run run-b" in undo.stderr
        assert head(repo, "run-a") == before and (repo / "README").read_text() == "A\n"
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err.decode()
    assert (repo / "README").read_text() == "B\n"


def test_a_killed_step_keeps_its_path_until_it_is_recovered(repo: Path) -> None:
    ok(repo, "begin", "--run", "run-a", "--task", "greeting")
    ok(repo, "begin", "--run", "run-b")
    killed = wal(repo, "apply", "--run", "run-a", "write-file", "README", input=b"A\n",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -9
    # The kernel dropped its path lock; its open intent still marks the path.
    refused = wal(repo, "apply", "--run", "run-b", "write-file", "README", input=b"B\n")
    assert refused.returncode == 1
    assert "README is being changed by run run-a (task 'greeting'), LSN 2 write_file" \
        in refused.stderr
    assert "`git wal recover --run run-a`" in refused.stderr
    ok(repo, "recover", "--run", "run-a")
    ok(repo, "apply", "--run", "run-b", "write-file", "README", input=b"B\n")
    assert (repo / "README").read_text() == "B\n"


def test_restoring_a_killed_shell_step_leaves_a_path_another_agent_is_writing(
        repo: Path) -> None:
    """Run A's Bash call was killed (its intent open); run B's Edit of README has
    logged its intent and written the file, its PostToolUse not yet run. Putting
    A's pre tree back must not put README back: B's update would be lost (its
    commit would then record the old content as what the Edit left)."""
    bash = {"command": "echo made > made.txt", "description": "x"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", bash, "t1",
                                                session=S1)).code == 0
    subprocess.run(["bash", "-c", bash["command"]], cwd=repo, check=True)
    first = edit(repo, "hello", "bye")
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", first, "u1",
                                                session=S2)).code == 0
    (repo / "README").write_text("bye\n")
    restored = wal(repo, "recover", "--run", claude_run(S1), "--restore")
    assert restored.returncode == 0, restored.stderr
    assert f"left README (being changed by run {claude_run(S2)}, LSN " in restored.stdout
    assert not (repo / "made.txt").exists()  # the step's own change is put back
    assert (repo / "README").read_text() == "bye\n"
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", first, "u1",
                                                session=S2))
    assert post.code == 0, post.err
    [commit] = [r for r in wal_log(repo, claude_run(S2)) if r["type"] == "commit"]
    assert commit["post"] == [git(repo, "hash-object", "README").strip()]
    assert "prediction miss" not in commit["verified"]
