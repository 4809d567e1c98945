"""Tool calls no agent may make (gitwal/agents/refusals.py): approving or
resolving a step, changing gitwal's settings, in any spelling, for every
agent; nothing is run or logged and the model is told to ask the user."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import git
from .test_agent_gemini import tool as gemini_tool
from .test_agent_irreversible import codex_bash
from .test_agent_payloads import claude_tool, run_hook

DECIDING = ["CLAUDECODE= git wal approve 2", "env -u CLAUDECODE git wal approve 2 --yes",
            "CLAUDECODE= git wal resolve 2 --applied", "git-wal approve 2",
            "python3 -m gitwal resolve 2 --not-applied", "sh -c 'git wal approve 2'",
            "git config wal.done.enforce false", "git config --local wal.done.enforce false",
            "git config --unset-all wal.irreversible", "git config --edit",
            "echo '[wal \"done\"]' >> .git/config", "printf '[wal]\\nx=1' > ~/.gitconfig",
            "cat .git/wal/secret", "$(printf git) wal approve 2"]


def denied(repo: Path, command: str) -> str:
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash",
                                             {"command": command}, "toolu_1"))
    assert r.code == 2, (command, r.out, r.err)
    return r.err


@pytest.mark.parametrize("command", DECIDING)
def test_claude_code_cannot_decide_or_switch_gates_off(repo: Path, command: str) -> None:
    err = denied(repo, command)
    assert "ask the user to run it themselves" in err
    assert "git wal runs" not in err  # nothing was begun
    assert git(repo, "for-each-ref", "refs/wal/").strip() == ""


@pytest.mark.parametrize("command", DECIDING[:7])
def test_codex_and_gemini_cannot_either(repo: Path, command: str) -> None:
    r = run_hook(repo, "codex", codex_bash(repo, command))
    assert r.code == 2 and "ask the user" in r.err, (command, r.out, r.err)
    r = run_hook(repo, "gemini", gemini_tool(repo, "BeforeTool", "run_shell_command",
                                             {"command": command}))
    assert r.code == 2 and "ask the user" in r.err, (command, r.out, r.err)


def test_an_editing_tool_cannot_write_git_config(repo: Path) -> None:
    for path in (repo / ".git" / "config", repo / ".git" / "wal" / "secret"):
        write = {"file_path": str(path), "content": "[wal]\n"}
        r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write, "toolu_1"))
        assert r.code == 2 and "git config file or gitwal's own state" in r.err, r.err


@pytest.mark.parametrize("command", ["git config --get wal.done.enforce", "git wal status",
                                     "git commit --allow-empty -m 'resolve: approve'",
                                     "cat .git/config"])
def test_reading_settings_and_ordinary_work_go_through(repo: Path, command: str) -> None:
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash",
                                             {"command": command}, "toolu_1"))
    assert r.code == 0, r.err
