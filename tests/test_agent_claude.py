"""Claude Code hooks: the real `git wal hook claude` entry point, payloads on stdin as
Claude Code sends them, real repositories; the log is read back with `git wal`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import GIT_WAL, git, ok, wal
from .test_agent_payloads import (
    claude,
    claude_run,
    claude_tool,
    run_hook,
    wal_log,
    wal_status,
)

RUN = claude_run()


def pre_post(repo: Path, tool: str, tool_input: dict[str, Any], call: str,
             apply: Any = None) -> tuple[Any, Any]:
    """PreToolUse, the agent's effect (``apply()``), PostToolUse."""
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", tool, tool_input, call))
    assert pre.code == 0, pre.err
    if apply is not None:
        apply()
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", tool, tool_input, call))
    assert post.code == 0, post.err
    return pre, post


def intents(repo: Path) -> list[dict[str, Any]]:
    return [r for r in wal_log(repo, RUN) if r["type"] == "intent"]


def by_type(repo: Path, kind: str) -> list[dict[str, Any]]:
    return [r for r in wal_log(repo, RUN) if r["type"] == kind]


@pytest.mark.slow
def test_edit_pre_and_post_commit_with_the_tool_use_id(repo: Path) -> None:
    f = repo / "README"
    edit = {"file_path": str(f), "old_string": "hello", "new_string": "bye",
            "replace_all": False}
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_01"))
    assert pre.code == 0, pre.err
    [intent] = intents(repo)
    assert intent["status"] == "open"
    assert intent["tool"] == "write_file" and intent["target"] == ["README"]
    assert intent["args"]["agent"] == {"name": "claude-code", "tool": "Edit",
                                       "call": "toolu_01"}
    # The predicted post-image is in the object database before the edit runs.
    assert git(repo, "cat-file", "blob", intent["post"][0]) == "bye\n"
    f.write_text("bye\n")
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit, "toolu_01"))
    assert post.code == 0, post.err
    [intent] = intents(repo)
    [commit] = by_type(repo, "commit")
    assert intent["status"] == "committed" and intent["prediction_miss"] is False
    assert commit["intent"] == intent["lsn"] and commit["post"] == intent["post"]
    assert commit["verified"].startswith("hash==post")
    st = wal_status(repo, RUN)
    assert st["committed"] == [intent["lsn"]] and st["open"] == [] and st["unlogged"] == []


@pytest.mark.slow
def test_multiedit_and_write_new_file(repo: Path) -> None:
    (repo / "a.py").write_text("x = 1\ny = 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    multi = {"file_path": str(repo / "a.py"), "edits": [
        {"old_string": "x = 1", "new_string": "x = 10"},
        {"old_string": "y = 2", "new_string": "y = 20"}]}
    pre_post(repo, "MultiEdit", multi, "toolu_m",
             lambda: (repo / "a.py").write_text("x = 10\ny = 20\n"))
    write = {"file_path": str(repo / "src" / "new.txt"), "content": "fresh\n"}

    def create() -> None:
        (repo / "src").mkdir()
        (repo / "src" / "new.txt").write_text("fresh\n")

    pre_post(repo, "Write", write, "toolu_w", create)
    got = intents(repo)
    assert [(i["target"], i["status"], i["pre"]) for i in got] == [
        (["a.py"], "committed", [git(repo, "rev-parse", "HEAD:a.py").strip()]),
        (["src/new.txt"], "committed", ["absent"])]
    assert wal_status(repo, RUN)["unlogged"] == []


def test_bash_pre_and_post_commit_the_post_tree(repo: Path) -> None:
    cmd = {"command": "echo made > made.txt", "description": "make a file"}
    pre_post(repo, "Bash", cmd, "toolu_b",
             lambda: subprocess.run(["bash", "-c", cmd["command"]], cwd=repo, check=True))
    [intent] = intents(repo)
    assert intent["tool"] == "exec" and intent["args"]["argv"] == ["bash", "-c",
                                                                    cmd["command"]]
    [commit] = by_type(repo, "commit")
    tree = commit["post"][0]
    assert git(repo, "cat-file", "-p", f"{tree}:made.txt") == "made\n"
    assert git(repo, "ls-tree", intent["pre"][0], "made.txt") == ""


def test_an_edit_gitwal_cannot_predict_is_logged_before_it_with_an_unknown_post(
        repo: Path) -> None:
    # The old text is absent, or ambiguous ("hello" has two l's): gitwal's copy
    # of the tool cannot compute the result, but the agent's tool might still
    # succeed (looser matching, a newer version). The intent comes first anyway.
    for old in ("not there", "l"):
        edit = {"file_path": str(repo / "README"), "old_string": old, "new_string": "x"}
        r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "t" + old))
        assert (r.code, r.out) == (0, ""), r.err
    logged = intents(repo)
    assert [i["args"]["agent"]["call"] for i in logged] == ["tnot there", "tl"]
    for i in logged:
        assert i["tool"] == "write_files" and i["post"] == ["unknown"]
        assert i["args"]["contents"] == ["unknown"] and i["replay"] == "unsafe"
    # The first call never closed and the file is untouched: not applied.
    assert [i["status"] for i in logged] == ["aborted", "open"]
    # The agent's tool did apply the second one after all: decided by hash.
    (repo / "README").write_text("hexlo\n")
    post = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit",
                                                {"file_path": str(repo / "README"),
                                                 "old_string": "l", "new_string": "x"}, "tl"))
    assert post.code == 0, post.err
    [commit] = by_type(repo, "commit")
    assert commit["post"] == [git(repo, "hash-object", "README").strip()]
    assert commit["verified"].startswith("post not predicted")
    last = intents(repo)[-1]
    assert last["status"] == "committed" and last["prediction_miss"] is False
    assert by_type(repo, "unlogged") == []
    assert json.loads(ok(repo, "verify", "--run", RUN, "--json"))["ok"]


def test_recovery_decides_an_unpredicted_edit_by_hash_and_never_guesses(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "nope", "new_string": "x"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_u")).code == 0
    (repo / "README").write_text("changed by the tool, or torn\n")
    proc = wal(repo, "recover", "--run", RUN, "--json")
    assert proc.returncode == 3, proc.stderr  # in doubt: nothing written
    [outcome] = json.loads(proc.stdout)["intents"]
    assert outcome["outcome"] == "in-doubt" and "not predicted" in outcome["detail"]
    assert (repo / "README").read_text() == "changed by the tool, or torn\n"
    # --restore saves what was found in the log first, then puts the pre-image back.
    proc = wal(repo, "recover", "--run", RUN, "--restore", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "README").read_text() == "hello\n"
    [outcome] = json.loads(proc.stdout)["intents"]
    [saved] = outcome["saved"]
    path, blob, command = saved["path"], saved["object"], saved["command"]
    assert path == "README" and blob in command
    assert git(repo, "cat-file", "blob", blob) == "changed by the tool, or torn\n"
    # Untouched: not applied, and never redone (its effect is not known).
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_v")).code == 0
    proc = wal(repo, "recover", "--run", RUN, "--redo", "--json")
    assert proc.returncode == 0, proc.stderr
    [outcome] = json.loads(proc.stdout)["intents"]
    assert outcome["outcome"] == "not-applied" and outcome["action"] == "aborted"
    assert (repo / "README").read_text() == "hello\n"
    assert json.loads(ok(repo, "verify", "--run", RUN, "--json"))["ok"]


def test_paths_outside_the_tree_and_other_tools_are_not_logged(repo: Path,
                                                              tmp_path: Path) -> None:
    outside = {"file_path": str(tmp_path / "elsewhere.txt"), "content": "x"}
    inside_git = {"file_path": str(repo / ".git" / "description"), "content": "x"}
    for n, tool_input in enumerate((outside, inside_git)):
        r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", tool_input,
                                                 f"t{n}"))
        assert r.code == 0, r.err
    read = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Read",
                                                {"file_path": str(repo / "README")}, "tr"))
    assert read.code == 0
    assert wal(repo, "log", "--run", RUN).returncode != 0  # no run was even begun


@pytest.mark.slow
def test_prediction_miss_commits_the_observed_post(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    # A formatter hook (or the agent's own normalisation) changed the result.
    pre_post(repo, "Edit", edit, "toolu_x", lambda: (repo / "README").write_text("BYE\n"))
    [intent] = intents(repo)
    [commit] = by_type(repo, "commit")
    assert intent["prediction_miss"] is True and intent["status"] == "committed"
    assert commit["post"] != intent["post"]
    assert git(repo, "cat-file", "blob", commit["post"][0]) == "BYE\n"
    assert commit["verified"].startswith("prediction miss")
    assert wal_status(repo, RUN)["prediction_miss"] == [intent["lsn"]]
    assert "prediction miss" in ok(repo, "status", "--run", RUN)
    assert "(prediction miss)" in ok(repo, "log", "--run", RUN)
    # verify accepts an agent's declared miss (replay of its Edit would not) ...
    assert json.loads(ok(repo, "verify", "--run", RUN, "--json"))["ok"]


@pytest.mark.slow
def test_post_tool_use_failure_aborts_and_leaves_the_tree(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_f")).code == 0
    r = run_hook(repo, "claude", claude_tool(repo, "PostToolUseFailure", "Edit", edit,
                                             "toolu_f", error="File has been modified"))
    assert r.code == 0, r.err
    [abort] = by_type(repo, "abort")
    assert "File has been modified" in abort["reason"] and abort["restored"] == []
    assert (repo / "README").read_text() == "hello\n"
    # A failed Bash call that changed files: abort, and its changes recorded, not undone.
    cmd = {"command": "echo half > half.txt; exit 1"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd,
                                                "toolu_g")).code == 0
    (repo / "half.txt").write_text("half\n")
    r = run_hook(repo, "claude", claude_tool(repo, "PostToolUseFailure", "Bash", cmd,
                                             "toolu_g", error="Exit code 1"))
    assert r.code == 0, r.err
    assert (repo / "half.txt").read_text() == "half\n"
    [unlogged] = by_type(repo, "unlogged")
    assert unlogged["paths"] == ["half.txt"]
    assert wal_status(repo, RUN)["open"] == []


@pytest.mark.slow
def test_a_missing_post_is_settled_by_the_next_pre(repo: Path) -> None:
    (repo / "b.txt").write_text("bee\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "b")
    # A landed Edit's PostToolUse runs in the background: the next PreToolUse
    # waits this long for it before settling the step from the tree.
    git(repo, "config", "wal.agent.openWait", "0.3")
    landed = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", landed,
                                                "toolu_1")).code == 0
    (repo / "README").write_text("bye\n")  # applied; its PostToolUse never came
    denied = {"file_path": str(repo / "b.txt"), "old_string": "bee", "new_string": "wasp"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", denied,
                                                "toolu_2")).code == 0
    # denied by the user: never applied, no PostToolUse either
    third = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", third,
                                                "toolu_3")).code == 0
    got = {i["args"]["agent"]["call"]: i["status"] for i in intents(repo)}
    assert got == {"toolu_1": "committed", "toolu_2": "aborted", "toolu_3": "open"}
    [commit] = by_type(repo, "commit")
    assert commit["recovered"] is True
    [abort] = by_type(repo, "abort")
    assert abort["reason"].startswith("not applied")
    assert by_type(repo, "unlogged") == []


def test_the_next_pre_waits_for_a_landed_edits_background_post(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostToolUse of a file tool is `async`: Claude Code may send the next call's
    PreToolUse first. That PreToolUse waits for it instead of settling the step."""
    from gitwal.agents.hook import run_hook as run_in_process

    git(repo, "config", "wal.agent.openWait", "120")
    first = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", first,
                                                "toolu_1")).code == 0
    (repo / "README").write_text("bye\n")  # the Edit ran; its PostToolUse is on its way
    waiting = threading.Event()
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        waiting.set()  # the PreToolUse below polls: it is waiting for toolu_1's close
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)  # gitwal.agents.appending polls with time.sleep
    second = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    got: list[tuple[int, str, str]] = []
    pre = threading.Thread(target=lambda: got.append(run_in_process(
        "claude", json.dumps(claude_tool(repo, "PreToolUse", "Write", second,
                                         "toolu_2")).encode())))
    pre.start()
    assert waiting.wait(120)
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", first,
                                                "toolu_1")).code == 0
    pre.join(120)
    assert got and got[0][0] == 0, got
    assert [(i["args"]["agent"]["call"], i["status"]) for i in intents(repo)] == [
        ("toolu_1", "committed"), ("toolu_2", "open")]
    [commit] = by_type(repo, "commit")
    assert commit["verified"] == "hash==post (claude-code PostToolUse Edit)", commit
    assert not commit.get("recovered")


def test_a_long_lived_process_sees_what_other_processes_appended(repo: Path) -> None:
    """The hook server keeps the log segment it read, by head commit: an append by
    another process (an in-process hook, `git wal recover`) is read, not missed."""
    from gitwal.agents.hook import run_hook as run_in_process

    def here(event: str, tool: str, tool_input: dict[str, Any], call: str) -> None:
        code, _, err = run_in_process("claude", json.dumps(
            claude_tool(repo, event, tool, tool_input, call)).encode(), served=True)
        assert code == 0, err

    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    here("PreToolUse", "Edit", edit, "toolu_1")
    (repo / "README").write_text("bye\n")
    here("PostToolUse", "Edit", edit, "toolu_1")
    write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write,
                                                "toolu_2")).code == 0  # another process
    (repo / "c.txt").write_text("c\n")
    here("PostToolUse", "Write", write, "toolu_2")
    assert [(i["args"]["agent"]["call"], i["status"]) for i in intents(repo)] == [
        ("toolu_1", "committed"), ("toolu_2", "committed")]
    assert by_type(repo, "unlogged") == []


def test_the_next_pre_settles_an_untouched_edit_at_once(repo: Path) -> None:
    git(repo, "config", "wal.agent.openWait", "120")  # would time out the test if it waited
    denied = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", denied,
                                                "toolu_1")).code == 0
    # Denied at the permission prompt: the file is untouched and no PostToolUse comes.
    write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    proc = subprocess.run([GIT_WAL, "hook", "claude"], cwd=repo, capture_output=True,
                          input=json.dumps(claude_tool(repo, "PreToolUse", "Write", write,
                                                       "toolu_2")).encode(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [i["status"] for i in intents(repo)] == ["aborted", "open"]


def test_recover_decides_an_open_hook_intent_from_the_tree(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_r")).code == 0
    (repo / "README").write_text("by")  # torn: the agent died mid-write
    proc = wal(repo, "recover", "--run", RUN, "--json")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "README").read_text() == "hello\n"  # restored from the pre-image
    [intent] = intents(repo)
    assert intent["status"] == "aborted"


@pytest.mark.slow
def test_an_edit_made_without_hooks_is_recorded_as_unlogged(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    pre_post(repo, "Edit", edit, "toolu_1", lambda: (repo / "README").write_text("bye\n"))
    (repo / "README").write_text("changed behind the log\n")  # no hook ran
    (repo / "stray.txt").write_text("new\n")
    other = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", other,
                                                "toolu_2")).code == 0
    [unlogged] = by_type(repo, "unlogged")
    assert unlogged["paths"] == ["README", "stray.txt"]
    assert unlogged["noticed"] == "claude-code PreToolUse Write"
    blob = unlogged["observed"][0]
    assert git(repo, "cat-file", "blob", blob) == "changed behind the log\n"
    st = wal_status(repo, RUN)
    assert st["unlogged"] == [unlogged["lsn"]]
    assert "unlogged" in ok(repo, "status", "--run", RUN)
    # Appended with the Write's intent, naming the observed blobs (git gc keeps them).
    names = git(repo, "ls-tree", "--name-only", f"refs/wal/{RUN}").split()
    assert f"{unlogged['lsn']:012d}.json" in names and f"obj-{blob}" in names
    # Recorded once: the next hook finds the tree as the log expects it.
    (repo / "c.txt").write_text("c\n")
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Write", other,
                                                "toolu_2")).code == 0
    assert len(by_type(repo, "unlogged")) == 1


def test_a_post_without_a_durable_intent_records_the_change(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    (repo / "README").write_text("bye\n")  # its PreToolUse timed out (failed open)
    r = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit, "toolu_9"))
    assert r.code == 0, r.err
    assert intents(repo) == []
    [unlogged] = by_type(repo, "unlogged")
    assert unlogged["paths"] == ["README"] and "no durable intent" in unlogged["noticed"]


@pytest.mark.slow
def test_an_intent_that_cannot_be_durable_blocks_the_call(repo: Path) -> None:
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0
    # A broken ref: the log cannot be read, so no intent can be appended to it.
    (repo / ".git" / "refs" / "wal" / RUN).write_text("not an object id\n")
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_1"))
    assert r.code == 2
    assert "refused" in r.err and "wal.agent.failOpen" in r.err
    git(repo, "config", "wal.agent.failOpen", "true")
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_1"))
    assert r.code == 0
    assert "unlogged" in r.json()["systemMessage"]


def test_a_wal_dir_that_cannot_be_written_blocks_the_call(repo: Path) -> None:
    (repo / ".git" / "wal").write_text("a file where gitwal keeps its directory\n")
    cmd = {"command": "true"}
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd, "toolu_1"))
    assert r.code == 2 and r.err.startswith("gitwal:")


@pytest.mark.slow
def test_session_start_resume_gives_the_resume_point(repo: Path) -> None:
    start = run_hook(repo, "claude", claude(repo, "SessionStart", source="startup"))
    ctx = start.json()["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart" and RUN in ctx["additionalContext"]
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    pre_post(repo, "Edit", edit, "toolu_1", lambda: (repo / "README").write_text("bye\n"))
    edit2 = {"file_path": str(repo / "README"), "old_string": "bye", "new_string": "ciao"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit2,
                                                "toolu_2")).code == 0
    # Claude Code dies here; `claude --resume` starts the same session again.
    r = run_hook(repo, "claude", claude(repo, "SessionStart", source="resume"))
    assert r.code == 0, r.err
    text = r.json()["hookSpecificOutput"]["additionalContext"]
    assert "Committed: 1 step(s)" in text
    assert "not committed. Found: not applied" in text
    assert "Action: LSN 4 (Edit README) did not land: make that change again with your Edit " \
           "tool" in text
    assert wal_status(repo, RUN)["open"] == []


def test_session_start_after_compact_reinjects_the_steps(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    pre_post(repo, "Edit", edit, "toolu_1", lambda: (repo / "README").write_text("bye\n"))
    r = run_hook(repo, "claude", claude(repo, "SessionStart", source="compact"))
    text = r.json()["hookSpecificOutput"]["additionalContext"]
    assert "Most recent logged steps" in text and "Edit README" in text


@pytest.mark.slow
def test_pre_compact_blocks_with_an_open_intent_and_checkpoints_otherwise(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_1")).code == 0
    r = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="manual",
                                        custom_instructions=""))
    assert r.code == 2 and f"git wal recover --run {RUN}" in r.err
    (repo / "README").write_text("bye\n")
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit,
                                                "toolu_1")).code == 0
    r = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="manual",
                                        custom_instructions=""))
    assert r.code == 0, r.err
    [cp] = by_type(repo, "checkpoint")
    assert cp["ref"].startswith(f"refs/wal-checkpoints/{RUN}/")
    assert git(repo, "cat-file", "-p", f"{cp['git']}:README") == "bye\n"
    assert git(repo, "rev-parse", "HEAD") != cp["git"]  # the branch is not touched
    again = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="manual"))
    assert again.code == 0 and len(by_type(repo, "checkpoint")) == 1


def interrupted_bash(repo: Path) -> dict[str, Any]:
    """A Bash call whose PreToolUse logged its intent and whose command changed the
    tree, then Claude Code died (no PostToolUse)."""
    cmd = {"command": "echo made > made.txt && rm README", "description": "x"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd,
                                                "toolu_b")).code == 0
    subprocess.run(["bash", "-c", cmd["command"]], cwd=repo, check=True)
    return intents(repo)[-1]


@pytest.mark.slow
def test_session_start_leaves_an_in_doubt_shell_step_open_and_compaction_waits(
        repo: Path) -> None:
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0
    write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    pre_post(repo, "Write", write, "toolu_w", lambda: (repo / "c.txt").write_text("c\n"))
    intent = interrupted_bash(repo)
    r = run_hook(repo, "claude", claude(repo, "SessionStart", source="resume"))
    assert r.code == 0, r.err
    text = r.json()["hookSpecificOutput"]["additionalContext"]
    assert f"LSN {intent['lsn']} is in doubt" in text
    assert "Changed paths: README, made.txt" in text
    # Nothing was appended behind the open intent: it is still the newest record.
    assert wal_log(repo, RUN)[-1]["lsn"] == intent["lsn"]
    assert [i["status"] for i in intents(repo)] == ["committed", "open"]
    r = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="manual"))
    assert r.code == 2
    assert f"git wal recover --run {RUN} --restore" in r.err and "Bash:" in r.err
    assert by_type(repo, "checkpoint") == []
    proc = wal(repo, "recover", "--run", RUN, "--restore")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "README").read_text() == "hello\n" and not (repo / "made.txt").exists()
    r = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="manual"))
    assert r.code == 0, r.err
    assert [i["status"] for i in intents(repo)] == ["committed", "aborted"]
    assert len(by_type(repo, "checkpoint")) == 1


@pytest.mark.slow
def test_the_next_tool_call_settles_an_in_doubt_shell_step_keeping_its_changes(
        repo: Path) -> None:
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0
    interrupted_bash(repo)
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="resume")).code == 0
    # A turn that ends without a tool call leaves it open too (and may not end:
    # the Stop hook refuses, naming the step; tests/test_agent_done.py).
    stop = run_hook(repo, "claude", claude(repo, "Stop", stop_hook_active=False))
    assert stop.code == 2 and "(Bash: echo made > made.txt && rm README) of run" in stop.err
    assert "is still open" in stop.err, stop.err
    assert [i["status"] for i in intents(repo)] == ["open"]
    # The model goes on instead of deciding: its next call settles the step from
    # the tree (no silent gap), and nothing is put back.
    write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write,
                                                "toolu_w")).code == 0
    assert [i["status"] for i in intents(repo)] == ["aborted", "open"]
    [unlogged] = by_type(repo, "unlogged")
    assert unlogged["paths"] == ["README", "made.txt"]
    assert (repo / "made.txt").exists() and not (repo / "README").exists()


@pytest.mark.slow
def test_auto_compaction_settles_an_open_intent_instead_of_failing(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_1")).code == 0
    (repo / "README").write_text("bye\n")  # landed; its PostToolUse hook failed
    r = run_hook(repo, "claude", claude(repo, "PreCompact", trigger="auto"))
    assert r.code == 0, r.err
    assert "checkpointed" in r.json()["systemMessage"]
    assert [i["status"] for i in intents(repo)] == ["committed"]
    assert len(by_type(repo, "checkpoint")) == 1


@pytest.mark.slow
def test_sigkill_mid_append_then_recovery(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_k"),
                 env={"GITWAL_CRASH_AT": "mid-append"})
    assert r.code == -signal.SIGKILL
    assert intents(repo) == []  # the intent never became durable
    # Claude Code treats a killed hook as a non-blocking error: the edit runs.
    (repo / "README").write_text("bye\n")
    proc = wal(repo, "recover", "--run", RUN)
    assert proc.returncode == 0, proc.stderr
    r = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit, "toolu_k"))
    assert r.code == 0, r.err
    [unlogged] = by_type(repo, "unlogged")
    assert unlogged["paths"] == ["README"]
    # Killed after the intent was durable: the PostToolUse closes it as usual.
    edit2 = {"file_path": str(repo / "README"), "old_string": "bye", "new_string": "ciao"}
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit2, "toolu_l"),
                 env={"GITWAL_CRASH_AT": "after-append"})
    assert r.code == -signal.SIGKILL
    (repo / "README").write_text("ciao\n")
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit2,
                                                "toolu_l")).code == 0
    assert [i["status"] for i in intents(repo)] == ["committed"]


def test_not_a_repository_is_not_our_business(tmp_path: Path) -> None:
    edit = {"file_path": str(tmp_path / "x"), "content": "x"}
    r = run_hook(tmp_path, "claude", claude_tool(tmp_path, "PreToolUse", "Write", edit, "t"))
    assert (r.code, r.out, r.err) == (0, "", "")


def test_garbage_input_blocks_a_pre_tool_use(repo: Path) -> None:
    proc = subprocess.run([str(Path(os.environ["PATH"].split(os.pathsep)[0]) / "git-wal"),
                           "hook", "claude", "PreToolUse"], cwd=repo, input=b"{not json",
                          capture_output=True)
    assert proc.returncode == 2 and b"not JSON" in proc.stderr


@pytest.mark.slow
def test_recover_inside_the_agents_own_bash_call_refuses_to_decide_it(repo: Path) -> None:
    """`git wal recover` run through Claude Code's Bash tool (which exports
    CLAUDECODE=1): the open Bash intent is that very call, still running."""
    cmd = {"command": f"{GIT_WAL} recover --run {RUN}", "description": "recover"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd,
                                                "toolu_r")).code == 0
    before = wal_log(repo, RUN)
    inside = wal(repo, "recover", "--run", RUN, env={"CLAUDECODE": "1"})
    assert inside.returncode == 1 and inside.stdout == ""
    assert inside.stderr.startswith(
        f"error: run {RUN}: LSN {before[-1]['lsn']} is a Bash call of claude-code that "
        "has not finished, and this recovery runs inside a claude-code tool call")
    assert "hint: the agent's hooks recover its run" in inside.stderr
    assert "Traceback" not in inside.stderr
    assert wal_log(repo, RUN) == before  # nothing decided, nothing appended
    # `git wal prompt` decides nothing, so it still answers.
    assert wal(repo, "prompt", "--run", RUN, env={"CLAUDECODE": "1"}).returncode == 0
    # The call ends; its own closing hook commits it.
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Bash", cmd,
                                                "toolu_r")).code == 0
    assert [i["status"] for i in intents(repo)] == ["committed"]


@pytest.mark.slow
def test_recover_from_a_terminal_or_another_agent_decides_the_open_bash_step(
        repo: Path) -> None:
    cmd = {"command": "true", "description": "nothing"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", cmd,
                                                "toolu_t")).code == 0
    proc = wal(repo, "recover", "--run", RUN, env={"GEMINI_CLI": "1"})
    # Decided from outside the call: nothing visible changed, but whether the
    # agent ran the command is unknown, so it is in doubt, not "not applied".
    assert proc.returncode == 3, proc.stderr
    assert "may have run" in proc.stdout
    proc = wal(repo, "recover", "--run", RUN, "--restore", env={"GEMINI_CLI": "1"})
    assert proc.returncode == 0, proc.stderr
    assert [i["status"] for i in intents(repo)] == ["aborted"]
