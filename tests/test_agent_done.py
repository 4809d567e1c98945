"""Done only with proof: the turn-end hooks (Claude Code Stop and SubagentStop, Codex
Stop) refuse to end a turn while a step is open, while changes no step explains were
not named to the model, or while the user's check has not passed on the tree. Real
repositories, the real `git wal hook` entry point, real check processes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents.hook import can_refuse

from .conftest import git
from .test_agent_payloads import claude, claude_run, claude_tool, run_hook, wal_log

RUN = claude_run()
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "codex-0.169.0"


def stop(repo: Path, active: bool = False, event: str = "Stop", **fields: Any) -> Any:
    return run_hook(repo, "claude", claude(repo, event, stop_hook_active=active, **fields))


def start(repo: Path) -> None:
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0


def step(repo: Path, tool: str, tool_input: dict[str, Any], call: str, apply: Any) -> None:
    """A logged call: PreToolUse, the tool's effect, PostToolUse."""
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", tool, tool_input, call))
    assert pre.code == 0, pre.err
    apply()
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", tool, tool_input, call))
    assert post.code == 0, post.err


def write(repo: Path, name: str, text: str, call: str) -> None:
    step(repo, "Write", {"file_path": str(repo / name), "content": text}, call,
         lambda: (repo / name).write_text(text))


def bash(repo: Path, command: str, call: str) -> None:
    step(repo, "Bash", {"command": command, "description": "x"}, call,
         lambda: subprocess.run(["bash", "-c", command], cwd=repo, check=True))


def records(repo: Path, kind: str) -> list[dict[str, Any]]:
    return [r for r in wal_log(repo, RUN) if r["type"] == kind]


def runs_of(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.mark.slow
def test_a_turn_whose_steps_are_all_logged_ends(repo: Path) -> None:
    start(repo)
    write(repo, "a.txt", "a\n", "toolu_1")
    r = stop(repo)
    assert (r.code, r.out, r.err) == (0, "", "")


@pytest.mark.slow
def test_a_shell_step_in_doubt_refuses_the_stop_until_a_tool_call_decides_it(
        repo: Path) -> None:
    start(repo)
    cmd = {"command": "echo made > made.txt && rm README", "description": "x"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd,
                                                "toolu_b")).code == 0
    subprocess.run(["bash", "-c", cmd["command"]], cwd=repo, check=True)  # then the crash
    r = stop(repo)
    assert r.code == 2, r.err
    [intent] = records(repo, "intent")
    assert f"LSN {intent['lsn']} (Bash: echo made > made.txt && rm README) of run {RUN} is " \
        "still open" in r.err
    assert "changed 2 path(s) (README, made.txt)" in r.err
    assert "make any tool call" in r.err and f"git wal recover --run {RUN} --restore" in r.err
    assert "refusal 1 of 3" in r.err
    # The model keeps the changes: its next call settles the step (abort, the changes
    # recorded as unlogged), and the stop after it is not refused for them again.
    bash(repo, "git status --short", "toolu_s")
    [intent, _status] = records(repo, "intent")
    assert intent["status"] == "aborted"
    [unlogged] = records(repo, "unlogged")
    assert unlogged["paths"] == ["README", "made.txt"]
    r = stop(repo, active=True)
    assert (r.code, r.err) == (0, ""), r.err
    assert (repo / "made.txt").read_text() == "made\n" and not (repo / "README").exists()


@pytest.mark.slow
def test_changes_no_step_explains_are_named_to_the_model_once(repo: Path) -> None:
    (repo / "mine.txt").write_text("the user's edit, before the session\n")
    start(repo)
    write(repo, "a.txt", "a\n", "toolu_1")
    (repo / "b.txt").write_text("made by something gitwal does not see\n")
    (repo / "README").write_text("changed behind the log\n")
    r = stop(repo)
    assert r.code == 2, r.err
    [unlogged] = [u for u in records(repo, "unlogged") if u["noticed"] == "Stop check"]
    assert unlogged["paths"] == ["README", "b.txt"]
    assert f"2 path(s) changed with no logged step explaining them (README, b.txt), " \
        f"recorded as unlogged at LSN {unlogged['lsn']} of run {RUN}" in r.err
    assert "do not undo a change that is not yours" in r.err
    assert "`git status --short -- README b.txt`, `git diff -- README b.txt`" in r.err
    assert "mine.txt" not in r.err  # found at SessionStart: not this turn's
    # Told once: the stop after it ends the turn, the bytes stay as they are.
    r = stop(repo, active=True)
    assert (r.code, r.err) == (0, ""), r.err
    assert (repo / "b.txt").exists() and (repo / "mine.txt").exists()
    # A new change is new news.
    (repo / "c.txt").write_text("c\n")
    r = stop(repo)
    assert r.code == 2 and "(c.txt)" in r.err, r.err


@pytest.mark.slow
def test_changes_found_before_a_compaction_are_still_named(repo: Path) -> None:
    start(repo)
    (repo / "b.txt").write_text("made behind the log\n")
    write(repo, "a.txt", "a\n", "toolu_1")  # its PreToolUse records b.txt as unlogged
    assert [u["paths"] for u in records(repo, "unlogged")] == [["b.txt"]]
    r = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="auto"))
    assert r.code == 0, r.err
    assert records(repo, "checkpoint")  # the segment now begins after b.txt's record
    r = stop(repo)
    assert r.code == 2 and "(b.txt)" in r.err, r.err
    r = stop(repo, active=True)
    assert (r.code, r.err) == (0, ""), r.err


@pytest.mark.slow
def test_the_check_runs_until_it_passes_and_not_again_on_the_same_tree(repo: Path) -> None:
    counter = repo / ".git" / "check-runs"
    check = f"echo run >> {counter}; test -f ok.txt || {{ echo 'FAIL: ok.txt missing'; exit 3; }}"
    git(repo, "config", "wal.done.check", check)
    start(repo)
    write(repo, "a.txt", "a\n", "toolu_1")
    r = stop(repo)
    assert r.code == 2, r.err
    assert "the project's check `echo run" in r.err and "failed (exit code 3)" in r.err
    assert "FAIL: ok.txt missing" in r.err and "fix what it reports" in r.err
    assert runs_of(counter) == 1
    # The model fixes it and stops again: the check passes on the new tree.
    write(repo, "ok.txt", "ok\n", "toolu_2")
    r = stop(repo, active=True)
    assert (r.code, r.err) == (0, ""), r.err
    assert runs_of(counter) == 2
    # Nothing changed since it passed: not run again.
    r = stop(repo)
    assert r.code == 0 and runs_of(counter) == 2
    # A change, logged or not, makes it run again.
    write(repo, "a.txt", "a2\n", "toolu_3")
    r = stop(repo)
    assert r.code == 0 and runs_of(counter) == 3
    # It ran at the top of the tree, whatever the agent's directory.
    (repo / "sub").mkdir()
    git(repo, "config", "wal.done.check",
        f"echo run >> {counter}; test -f ok.txt && pwd > .git/where")
    r = run_hook(repo / "sub", "claude", claude(repo / "sub", "Stop", stop_hook_active=False))
    assert r.code == 0, r.err
    assert (repo / ".git" / "where").read_text().strip() == str(repo)
    # The check's pass is kept in the run's state file, durably.
    state = json.loads((repo / ".git" / "wal" / "done" / f"{RUN}.json").read_text())
    assert state["passed"]["check"].endswith("pwd > .git/where")


@pytest.mark.slow
def test_a_check_that_changes_the_tree_has_its_changes_recorded_as_its_own(
        repo: Path) -> None:
    git(repo, "config", "wal.done.check", "echo built > build.out")
    start(repo)
    write(repo, "a.txt", "a\n", "toolu_1")
    r = stop(repo)
    assert (r.code, r.err) == (0, ""), r.err
    [unlogged] = records(repo, "unlogged")
    assert unlogged["paths"] == ["build.out"] and unlogged["noticed"].startswith(
        "wal.done.check")
    r = stop(repo)  # nothing new: neither refused nor run again on its own output
    assert (r.code, r.err) == (0, ""), r.err
    assert len(records(repo, "unlogged")) == 1


@pytest.mark.slow
def test_a_check_that_does_not_finish_is_killed_and_refuses(repo: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    git(repo, "config", "wal.done.check", f"cat {fifo}")
    git(repo, "config", "wal.done.checkTimeout", "0.5")
    start(repo)
    r = stop(repo)
    assert r.code == 2 and "did not finish within 0.5 s" in r.err, r.err


@pytest.mark.slow
def test_refusals_for_the_same_reason_are_bounded(repo: Path) -> None:
    git(repo, "config", "wal.done.check", "echo still broken; exit 1")
    start(repo)
    for n in (1, 2, 3):
        r = stop(repo, active=n > 1)
        assert r.code == 2 and f"this is refusal {n} of 3" in r.err, r.err
    r = stop(repo, active=True)
    assert r.code == 0, r.err
    warning = r.json()["systemMessage"]
    assert "let the turn end after 3 refusals in a row" in warning
    assert "still broken" in warning
    # A stop of the agent's own (not a continuation) starts a new count.
    r = stop(repo)
    assert r.code == 2 and "this is refusal 1 of 3" in r.err, r.err


@pytest.mark.slow
def test_new_changes_at_every_stop_are_bounded_too(repo: Path) -> None:
    """A program that keeps writing files is news at every stop: 6 refusals in a
    row at most, whatever the reasons."""
    start(repo)
    for n in range(1, 7):
        (repo / f"out{n}.log").write_text("written meanwhile\n")
        r = stop(repo, active=n > 1)
        assert r.code == 2 and f"(out{n}.log)" in r.err, (n, r.err)
    (repo / "out7.log").write_text("written meanwhile\n")
    r = stop(repo, active=True)
    assert r.code == 0, r.err
    assert "let the turn end after 6 refusals in a row" in r.json()["systemMessage"]


@pytest.mark.slow
def test_enforce_false_turns_the_rules_off(repo: Path) -> None:
    counter = repo / ".git" / "check-runs"
    git(repo, "config", "wal.done.enforce", "false")
    git(repo, "config", "wal.done.check", f"echo run >> {counter}; exit 1")
    start(repo)
    (repo / "b.txt").write_text("unlogged\n")
    r = stop(repo)
    assert (r.code, r.err) == (0, ""), r.err
    assert runs_of(counter) == 0
    # The turn's end still settles and records, as before.
    assert [u["paths"] for u in records(repo, "unlogged")] == [["b.txt"]]


@pytest.mark.slow
def test_a_failure_of_gitwal_never_refuses_the_stop(repo: Path) -> None:
    start(repo)
    (repo / ".git" / "wal" / "done").write_text("not a directory\n")  # the state cannot be kept
    (repo / "b.txt").write_text("unlogged\n")
    r = stop(repo)
    assert r.code == 1 and r.err.startswith("gitwal: "), (r.code, r.err)


@pytest.mark.slow
def test_subagent_stop_is_gated_for_its_own_thread(repo: Path) -> None:
    counter = repo / ".git" / "check-runs"
    git(repo, "config", "wal.done.check", f"echo run >> {counter}; exit 1")
    start(repo)
    # Changes no step explains, and a failing check: the main agent's to hear about.
    (repo / "b.txt").write_text("unlogged\n")
    r = stop(repo, event="SubagentStop", agent_id="agent-7", agent_type="general-purpose")
    assert (r.code, r.err) == (0, ""), r.err
    assert runs_of(counter) == 0
    r = stop(repo)
    assert r.code == 2 and "(b.txt)" in r.err, r.err
    git(repo, "config", "--unset", "wal.done.check")
    cmd = {"command": "echo made > made.txt", "description": "x"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd,
                                                "toolu_b")).code == 0
    subprocess.run(["bash", "-c", cmd["command"]], cwd=repo, check=True)
    # The main thread's step in doubt is not the subagent's to decide.
    r = stop(repo, event="SubagentStop", agent_id="agent-7", agent_type="general-purpose")
    assert (r.code, r.err) == (0, ""), r.err
    r = stop(repo)
    assert r.code == 2 and "(Bash: echo made > made.txt) of run" in r.err, r.err
    # A subagent's own open step refuses its stop.
    sub = claude_tool(repo, "PreToolUse", "Bash", {"command": "echo x > x.txt"}, "toolu_c",
                      agent_id="agent-7")
    bash(repo, "true", "toolu_main")  # settles the main thread's step first
    assert run_hook(repo, "claude", sub).code == 0
    subprocess.run(["bash", "-c", "echo x > x.txt"], cwd=repo, check=True)
    r = stop(repo, active=False, event="SubagentStop", agent_id="agent-7")
    assert r.code == 2 and "(Bash: echo x > x.txt)" in r.err, r.err


@pytest.mark.slow
def test_codex_stop_is_gated_as_claude_codes(repo: Path) -> None:
    payload = json.loads((FIXTURES / "stop.json").read_text())
    payload["cwd"] = str(repo)
    start_payload = json.loads((FIXTURES / "session-start.json").read_text())
    start_payload["cwd"] = str(repo)
    assert run_hook(repo, "codex", start_payload).code == 0
    (repo / "b.txt").write_text("unlogged\n")
    r = run_hook(repo, "codex", payload)
    assert r.code == 2 and "changed with no logged step explaining them (b.txt)" in r.err
    assert f"run codex-{payload['session_id']}" in r.err
    r = run_hook(repo, "codex", {**payload, "stop_hook_active": True})
    assert (r.code, r.err) == (0, ""), r.err


def test_a_hook_that_crashed_refuses_a_tool_call_but_never_a_stop() -> None:
    """What the hook server answers when handling a call raised (a bug)."""
    def data(event: str) -> bytes:
        return json.dumps({"hook_event_name": event, "session_id": "s"}).encode()

    assert can_refuse("claude", data("PreToolUse")) and can_refuse("codex", data("PreCompact"))
    assert not can_refuse("claude", data("Stop"))
    assert not can_refuse("claude", data("SubagentStop"))
    assert not can_refuse("codex", data("Stop"))
    assert can_refuse("claude", b"not json") and can_refuse("nobody", data("Stop"))


@pytest.mark.slow
def test_a_path_in_a_reason_has_its_control_characters_escaped(repo: Path) -> None:
    start(repo)
    (repo / "two\nlines.txt").write_text("x\n")
    r = stop(repo)
    assert r.code == 2 and "(two\\nlines.txt)" in r.err and "two\nlines" not in r.err, r.err


def test_gemini_after_agent_is_gated_as_claude_codes(repo: Path) -> None:
    gemini_fixtures = FIXTURES.parent / "gemini-0.61.0"
    payload = json.loads((gemini_fixtures / "AfterAgent.json").read_text())
    payload["cwd"] = str(repo)
    start_payload = json.loads((gemini_fixtures / "SessionStart.json").read_text())
    start_payload["cwd"] = str(repo)
    assert run_hook(repo, "gemini", start_payload).code == 0
    (repo / "b.txt").write_text("unlogged\n")
    r = run_hook(repo, "gemini", payload)
    assert r.code == 2 and "changed with no logged step explaining them (b.txt)" in r.err
    r = run_hook(repo, "gemini", {**payload, "stop_hook_active": True})
    assert (r.code, r.err) == (0, ""), r.err
    assert not can_refuse("gemini", json.dumps(payload).encode())  # a crash lets it stop
