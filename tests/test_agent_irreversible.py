"""An agent's irreversible shell calls (`wal.irreversible`, gitwal/agents/approvals.py):
logged, put to the user in Claude Code's permission prompt, the user's yes
recorded as an approval; refused for agents whose hooks cannot ask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, wal
from .test_agent_payloads import SESSION, claude_run, claude_tool, run_hook, wal_log

PUSH = {"command": "git push origin main"}


def irreversible(repo: Path) -> None:
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.org")
    git(repo, "config", "--add", "wal.irreversible", "npm publish*")
    git(repo, "config", "--add", "wal.irreversible", "git push*")


def test_claude_asks_the_user_and_records_the_yes_before_the_commit(repo: Path) -> None:
    irreversible(repo)
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", PUSH, "toolu_1"))
    assert r.code == 0, r.err
    out = json.loads(r.out)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "ask"
    assert "irreversible here (wal.irreversible 'git push*')" in out["permissionDecisionReason"]
    records = wal_log(repo, claude_run())
    intent = records[-1]
    assert intent["type"] == "intent" and intent["args"]["irreversible"] is True
    assert f"logged as LSN {intent['lsn']}" in out["permissionDecisionReason"]

    # The user allowed it: the agent ran it, then its closing hook came.
    r = run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Bash", PUSH, "toolu_1"))
    assert r.code == 0, r.err
    approval, commit = wal_log(repo, claude_run())[-2:]
    assert approval["type"] == "approval" and approval["intent"] == intent["lsn"]
    assert approval["approved_by"] == ("Ada <ada@example.org>, in claude-code's permission "
                                       "prompt")
    assert commit["type"] == "commit" and commit["intent"] == intent["lsn"]
    assert wal(repo, "verify", "--run", claude_run()).returncode == 0


def test_other_commands_are_not_asked_about(repo: Path) -> None:
    irreversible(repo)
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash",
                                             {"command": "git status"}, "toolu_1"))
    assert (r.code, r.out) == (0, ""), r.err
    assert "irreversible" not in wal_log(repo, claude_run())[-1]["args"]


def test_a_denied_call_never_runs_and_is_settled_without_an_approval(repo: Path) -> None:
    irreversible(repo)
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", PUSH,
                                                "toolu_1")).code == 0
    # Denied: no closing hook. The next call settles the step; nobody approved it.
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write,
                                                "toolu_2")).code == 0
    kinds = [r["type"] for r in wal_log(repo, claude_run())]
    assert "approval" not in kinds and kinds[-1] == "intent"
    assert wal(repo, "verify", "--run", claude_run()).returncode == 0


def codex_bash(repo: Path, command: str) -> dict[str, Any]:
    return {"session_id": SESSION, "turn_id": "t1", "transcript_path": None,
            "cwd": str(repo), "hook_event_name": "PreToolUse", "model": "gpt-5.5",
            "tool_name": "Bash", "tool_use_id": "call_1", "tool_input": {"command": command}}


def test_an_agent_that_cannot_ask_is_refused_and_nothing_is_logged(repo: Path) -> None:
    irreversible(repo)
    r = run_hook(repo, "codex", codex_bash(repo, "npm publish --access public"))
    assert r.code == 2
    assert "needs a person's approval, which codex's hooks cannot ask for" in r.err
    assert "git wal exec --irreversible" in r.err
    runs = wal(repo, "runs", "--json")
    assert f"codex-{SESSION}" not in runs.stdout


SPELLINGS = ["cd . && git push", "git -C . push origin main", "(git push)", "FOO=1 git push",
             "git  push", "sh -c 'git push'", "env -u X nice -n 5 git --no-pager push",
             "true; bash -c \"git push origin\""]


@pytest.mark.parametrize("command", SPELLINGS)
def test_every_spelling_of_an_irreversible_command_is_asked(repo: Path, command: str) -> None:
    irreversible(repo)
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash",
                                             {"command": command}, "toolu_1"))
    assert r.code == 0, r.err
    out = json.loads(r.out)["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask", command
    assert "wal.irreversible 'git push*'" in out["permissionDecisionReason"]
    assert wal_log(repo, claude_run())[-1]["args"]["irreversible"] is True


@pytest.mark.parametrize("command", SPELLINGS[:4])
def test_every_spelling_is_refused_where_the_hooks_cannot_ask(repo: Path, command: str) -> None:
    irreversible(repo)
    r = run_hook(repo, "codex", codex_bash(repo, command))
    assert r.code == 2 and "cannot ask for" in r.err, command


def test_a_line_that_cannot_be_read_does_not_run_unasked(repo: Path) -> None:
    irreversible(repo)
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash",
                                             {"command": "$(printf git) push"}, "toolu_1"))
    # Refused outright (it could as well approve a step: agents/refusals.py), not run.
    assert r.code == 2 and "cannot read this command line as a shell would" in r.err


def test_an_alias_of_the_local_config_is_followed(repo: Path) -> None:
    irreversible(repo)
    git(repo, "config", "alias.p", "push")
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash",
                                             {"command": "git p origin"}, "toolu_1"))
    assert json.loads(r.out)["hookSpecificOutput"]["permissionDecision"] == "ask"
