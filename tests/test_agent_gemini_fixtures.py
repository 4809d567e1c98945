"""The hook payloads Gemini CLI 0.61.0 really sends (recorded by the end-to-end
suite, temp paths scrubbed: tests/fixtures/gemini-0.61.0/), fed to the adapter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import gemini
from gitwal.agents.actions import Close, FileStep, SessionStart, ShellStep, TurnEnd

FIXTURES = Path(__file__).parent / "fixtures" / "gemini-0.61.0"
NAMES = ("SessionStart", "PreCompress", "BeforeTool-write_file", "AfterTool-write_file",
         "BeforeTool-replace", "AfterTool-replace", "BeforeTool-run_shell_command",
         "AfterTool-run_shell_command", "AfterAgent")


def fixture(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    assert isinstance(data, dict)
    return data


def act(name: str) -> object:
    payload = fixture(name)
    return gemini.action(payload["hook_event_name"], payload)


def test_every_fixture_is_there_and_scrubbed() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(NAMES)
    for name in NAMES:
        text = (FIXTURES / f"{name}.json").read_text()
        assert "\"/tmp/" not in text and ": /tmp/" not in text, name  # temp dirs scrubbed


def test_session_events() -> None:
    assert act("SessionStart") == SessionStart("startup")
    # Fired before every model request with trigger "auto": settled quietly.
    assert fixture("PreCompress")["trigger"] == "auto"
    assert act("PreCompress") == TurnEnd(whole_tree=False)  # as at a tool call
    assert act("AfterAgent") == TurnEnd(gate=True)  # the whole tree; done only with proof


@pytest.mark.parametrize("tool, pre, post", [
    ("write_file", None, b"hello\n"),
    ("replace", b"def f():\n    if a:\n        return a\n",
     b"def f():\n    if b:\n        return b\n"),  # allow_multiple: both occurrences
])
def test_file_tools(tool: str, pre: bytes | None, post: bytes) -> None:
    before, after = act(f"BeforeTool-{tool}"), act(f"AfterTool-{tool}")
    assert isinstance(before, FileStep) and isinstance(after, Close)
    assert before.call.call_id == after.call.call_id  # no call id: the same digest
    assert before.paths == after.paths and before.paths[0].startswith("/work/project/")
    assert before.compute(["f"])((pre,)) == (post,)
    assert after.error is None


def test_shell_tool() -> None:
    before, after = act("BeforeTool-run_shell_command"), act("AfterTool-run_shell_command")
    assert isinstance(before, ShellStep) and isinstance(after, Close)
    assert (before.command, before.directory) == ("pwd; exit 3", "sub")
    assert after.outcome == "exit code 3" and after.error is None
    assert before.call.call_id == after.call.call_id
