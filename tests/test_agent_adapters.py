"""The adapters' contract (gitwal/agents/adapter.py): every adapter keeps it, none
imports another, and the stdlib client agrees with them on what blocks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gitwal.agents import adapter, claude, client, codex, common, gemini
from gitwal.agents.actions import Reply

AGENTS_DIR = Path(adapter.__file__).parent
ADAPTERS = {"claude": claude, "codex": codex, "gemini": gemini}


def test_every_adapter_keeps_the_contract() -> None:
    assert set(adapter.AGENTS) == set(ADAPTERS)
    for name, mod in ADAPTERS.items():
        a = adapter.adapter(name)
        assert a is mod and isinstance(a, adapter.Adapter)
        assert set(a.BLOCKING) <= set(a.EVENTS) and set(a.CLOSING) <= set(a.EVENTS)
        assert set(a.groups("cmd")) == set(a.EVENTS)
    with pytest.raises(KeyError):
        adapter.adapter("common")  # a module of the package, not an adapter


def test_no_adapter_imports_another() -> None:
    for name in ADAPTERS:
        tree = ast.parse((AGENTS_DIR / f"{name}.py").read_text())
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported |= {node.module} if node.module else {a.name for a in node.names}
        assert imported, name
        assert not imported & set(ADAPTERS), f"{name}.py imports {imported & set(ADAPTERS)}"


def test_the_client_refuses_every_event_an_adapter_blocks() -> None:
    # The stdlib client cannot import the adapters: without gitwal it must still
    # refuse whatever an adapter would block (the WAL rule), and knows no other event.
    blocking = {e for m in ADAPTERS.values() for e in m.BLOCKING}
    assert blocking <= set(client.BLOCKING_EVENTS)
    assert set(client.BLOCKING_EVENTS) <= {e for m in ADAPTERS.values() for e in m.EVENTS}


def test_calls_are_named_alike_by_every_adapter() -> None:
    payload = {"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"},
               "agent_id": "sub1"}
    digest = common.call_id(payload)
    assert digest.startswith("h") and len(digest) == 25
    assert claude.call_of(payload).tag() == {"name": "claude-code", "tool": "Bash",
                                             "call": digest, "thread": "sub1"}
    assert codex.call_of(payload).thread == "sub1"
    assert gemini.call_of(payload).tag() == {"name": "gemini-cli", "tool": "Bash",
                                             "call": digest}  # no threads
    assert claude.call_of({**payload, "tool_use_id": "toolu_9"}).call_id == "toolu_9"


def test_the_shared_reply_protocol() -> None:
    for mod in ADAPTERS.values():
        assert mod.render("PreToolUse", Reply(block="no")) == (2, "", "no\n")
        assert mod.render("Stop", Reply(error="bad")) == (1, "", "bad\n")
        assert mod.render("SessionStart", Reply(context="c")) == (
            0, '{"hookSpecificOutput": {"hookEventName": "SessionStart", '
               '"additionalContext": "c"}}\n', "")
