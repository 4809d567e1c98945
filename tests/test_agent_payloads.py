"""Agent hook payloads shaped as the agents send them, the hook entry points run as
subprocesses (helpers shared by tests/test_agent_*.py), and the post-image functions."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import edits
from gitwal.base.errors import ToolRefused

from .conftest import GIT_WAL

SESSION = "5f1c2e9a-0b7d-4c1e-9a55-2f4d6c8e1b23"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out) if self.out.strip() else None


def run_hook(repo: Path, agent: str, payload: dict[str, Any], *args: str,
             env: dict[str, str] | None = None) -> Result:
    """`git wal hook AGENT` with ``payload`` on stdin, as the agent runs it."""
    proc = subprocess.run(
        [GIT_WAL, "hook", agent, *args], cwd=repo, input=json.dumps(payload).encode(),
        capture_output=True, env={**os.environ, **(env or {})},
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def claude(repo: Path, event: str, session: str = SESSION, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook payload (common fields, then the event's own)."""
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": f"/home/u/.claude/projects/x/{session}.jsonl",
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": event,
    }
    payload.update(fields)
    return payload


def claude_tool(repo: Path, event: str, tool: str, tool_input: dict[str, Any], call: str,
                session: str = SESSION, **fields: Any) -> dict[str, Any]:
    payload = claude(repo, event, session, tool_name=tool, tool_input=tool_input,
                     tool_use_id=call)
    if event == "PostToolUse":
        payload["tool_response"] = fields.pop("tool_response", {"success": True})
    if event == "PostToolUseFailure":
        payload["error"] = fields.pop("error", "failed")
        payload["is_interrupt"] = fields.pop("is_interrupt", False)
    payload.update(fields)
    return payload


def wal_log(repo: Path, run: str) -> list[dict[str, Any]]:
    proc = subprocess.run([GIT_WAL, "log", "--json", "--run", run], cwd=repo,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def wal_status(repo: Path, run: str) -> dict[str, Any]:
    proc = subprocess.run([GIT_WAL, "status", "--json", "--run", run], cwd=repo,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    return data


def claude_run(session: str = SESSION) -> str:
    return f"claude-{session}"


# -- the post-image functions (pure) ---------------------------------------------


def test_edit_replaces_the_unique_occurrence() -> None:
    got = edits.edit(b"a b a\n", {"old_string": "b", "new_string": "c"}, "f")
    assert got == b"a c a\n"


def test_edit_refuses_absent_and_ambiguous_old_strings() -> None:
    with pytest.raises(ToolRefused, match="not found"):
        edits.edit(b"abc", {"old_string": "x", "new_string": "y"}, "f")
    with pytest.raises(ToolRefused, match="2 times"):
        edits.edit(b"a b a", {"old_string": "a", "new_string": "y"}, "f")
    with pytest.raises(ToolRefused, match="does not exist"):
        edits.edit(None, {"old_string": "a", "new_string": "y"}, "f")
    with pytest.raises(ToolRefused, match="the same"):
        edits.edit(b"a", {"old_string": "a", "new_string": "a"}, "f")


def test_edit_replace_all_and_creation_and_crlf() -> None:
    assert edits.edit(b"a b a", {"old_string": "a", "new_string": "y", "replace_all": True},
                      "f") == b"y b y"
    assert edits.edit(None, {"old_string": "", "new_string": "new\n"}, "f") == b"new\n"
    with pytest.raises(ToolRefused):
        edits.edit(b"exists", {"old_string": "", "new_string": "x"}, "f")
    # The old text is matched with \n line ends; the file keeps its \r\n.
    assert edits.edit(b"one\r\ntwo\r\n", {"old_string": "one\ntwo", "new_string": "1\n2"},
                      "f") == b"1\r\n2\r\n"


def test_multi_edit_applies_in_order_on_the_previous_result() -> None:
    got = edits.multi_edit(b"alpha beta", {"edits": [
        {"old_string": "alpha", "new_string": "beta"},
        {"old_string": "beta", "new_string": "gamma", "replace_all": True},
    ]}, "f")
    assert got == b"gamma gamma"
    with pytest.raises(ToolRefused):  # the second edit no longer finds its text
        edits.multi_edit(b"alpha", {"edits": [
            {"old_string": "alpha", "new_string": "beta"},
            {"old_string": "alpha", "new_string": "x"}]}, "f")


def test_notebook_edit_replaces_a_cell_by_id() -> None:
    nb = {"cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "source": "1",
                     "outputs": [], "execution_count": 3}], "metadata": {}, "nbformat": 4,
          "nbformat_minor": 5}
    got = edits.notebook_edit(json.dumps(nb).encode(), {
        "notebook_path": "/x.ipynb", "cell_id": "c1", "new_source": "2"}, "x.ipynb")
    assert got is not None
    cell = json.loads(got)["cells"][0]
    assert cell["source"] == "2" and cell["execution_count"] is None
    with pytest.raises(ToolRefused):
        edits.notebook_edit(json.dumps(nb).encode(), {"cell_id": "nope", "new_source": ""},
                            "x.ipynb")
