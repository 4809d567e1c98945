"""Gemini CLI: BeforeTool/AfterTool hooks run as Gemini runs them (payloads shaped as
its hooks reference shows: no call id, ``tool_response.error`` on failure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, ok
from .test_agent_payloads import SESSION, run_hook, wal_log

RUN = f"gemini-{SESSION}"


def gemini(repo: Path, event: str, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"session_id": SESSION, "transcript_path": "/t.json",
                               "cwd": str(repo), "hook_event_name": event,
                               "timestamp": "2026-12-02T12:00:00.000Z"}
    payload.update(fields)
    return payload


def tool(repo: Path, event: str, name: str, tool_input: dict[str, Any],
         error: str | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if event == "AfterTool":
        extra["tool_response"] = {"llmContent": "ok", "returnDisplay": "ok"}
        if error:
            extra["tool_response"]["error"] = error
    return gemini(repo, event, tool_name=name, tool_input=tool_input, **extra)


def intents(repo: Path) -> list[dict[str, Any]]:
    return [x for x in wal_log(repo, RUN) if x["type"] == "intent"]


@pytest.mark.slow
def test_replace_and_write_file_before_and_after(repo: Path) -> None:
    rep = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
    (repo / "README").write_text("bye\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "replace", rep)).code == 0
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
    (repo / "n.txt").write_text("n\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    got = intents(repo)
    assert [(i["target"], i["status"]) for i in got] == [(["README"], "committed"),
                                                          (["n.txt"], "committed")]
    assert got[0]["args"]["agent"]["name"] == "gemini-cli"


def test_an_identical_later_call_gets_its_own_intent(repo: Path) -> None:
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    for _ in range(2):  # the same input twice: the same derived call id
        assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
        (repo / "n.txt").write_text("n\n")
        assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    assert [i["status"] for i in intents(repo)] == ["committed", "committed"]


@pytest.mark.slow
def test_a_failed_tool_aborts_and_a_shell_call_commits(repo: Path) -> None:
    rep = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
    r = run_hook(repo, "gemini", tool(repo, "AfterTool", "replace", rep, error="denied"))
    assert r.code == 0, r.err
    sh = {"command": "echo x > x.txt", "description": "write x"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "run_shell_command", sh)).code == 0
    (repo / "x.txt").write_text("x\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "run_shell_command", sh)).code == 0
    assert [(i["tool"], i["status"]) for i in intents(repo)] == [("write_file", "aborted"),
                                                                  ("exec", "committed")]


@pytest.mark.slow
def test_pre_compress_is_advisory_and_checkpoints(repo: Path) -> None:
    rep = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
    (repo / "README").write_text("bye\n")  # its AfterTool never came
    r = run_hook(repo, "gemini", gemini(repo, "PreCompress", trigger="manual"))
    assert r.code == 0, r.err  # never a block: Gemini would not wait for it anyway
    assert "checkpointed" in r.json()["systemMessage"]
    assert [i["status"] for i in intents(repo)] == ["committed"]
    assert git(repo, "for-each-ref", f"refs/wal-checkpoints/{RUN}/").strip()


def test_a_call_that_cannot_be_logged_is_blocked(repo: Path) -> None:
    assert run_hook(repo, "gemini", gemini(repo, "SessionStart", source="startup")).code == 0
    (repo / ".git" / "refs" / "wal" / RUN).write_text("broken\n")
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    r = run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new))
    assert r.code == 2 and "refused" in r.err


def test_install_gemini(repo: Path) -> None:
    (repo / ".gemini").mkdir()
    mine = {"model": {"name": "gemini-2.5-pro"}}
    (repo / ".gemini" / "settings.json").write_text(json.dumps(mine))
    ok(repo, "install", "gemini")
    data = json.loads((repo / ".gemini" / "settings.json").read_text())
    before = data["hooks"]["BeforeTool"][0]
    assert before["matcher"] == "write_file|replace|run_shell_command"
    assert before["hooks"][0]["timeout"] == 60000 and data["model"] == mine["model"]
    ok(repo, "uninstall", "gemini")
    assert json.loads((repo / ".gemini" / "settings.json").read_text()) == mine
