"""Gemini CLI: hook payloads -> actions, replies -> exit code and JSON.

Gemini CLI reads hooks from ``.gemini/settings.json`` (project) and
``~/.gemini/settings.json`` (user), in the event -> matcher group ->
handlers shape (``timeout`` in milliseconds). Every payload carries
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and
``timestamp``; ``BeforeTool`` adds ``tool_name`` and ``tool_input``,
``AfterTool`` also ``tool_response`` (with ``error`` when the tool failed),
``SessionStart`` ``source``, ``PreCompress`` ``trigger``.

Tool payloads carry no call id: the call is identified by a digest of the
session, the tool and its input, which ``BeforeTool`` and ``AfterTool``
share; an identical later call gets a new intent (only an open intent
counts as "already logged").

``PreCompress`` is advisory: it runs asynchronously and cannot block or
delay the compression. gitwal still settles what is open and checkpoints,
but it may finish after the history was summarised; ``SessionStart`` gives
the state back only on the next session (docs/agents.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ToolRefused
from . import common
from .call import Call
from .edits import replace
from .engine import (
    Action,
    Close,
    Compute,
    FileStep,
    Ignore,
    PreCompact,
    SessionStart,
    ShellStep,
    TurnEnd,
)

AGENT = "gemini-cli"
PREFIX = "gemini"
SHELL_TOOLS = ("run_shell_command",)
FILE_TOOLS = ("write_file", "replace")
MATCHER = "write_file|replace|run_shell_command"
EVENTS: dict[str, str | None] = {
    "BeforeTool": MATCHER,
    "AfterTool": MATCHER,
    "SessionStart": None,
    "PreCompress": None,
    "AfterAgent": None,
}
TIMEOUT_MS = 60000
CLOSING = ("AfterTool",)
BLOCKING = ("BeforeTool",)
ASYNC_CLOSE: tuple[str, ...] = ()  # every closing hook is synchronous
render = common.render  # Gemini CLI follows Claude Code's reply protocol
INSTALL_NOTE = ("Gemini CLI runs these hooks when hooks are enabled in its settings "
                "(`\"hooks\": {\"enabled\": true}` in releases that still gate them).")

__all__ = ["AGENT", "ASYNC_CLOSE", "BLOCKING", "CLOSING", "EVENTS", "INSTALL_NOTE", "PREFIX",
           "action", "call_of", "groups", "render"]


def call_of(payload: Mapping[str, Any]) -> Call:
    # No tool_use_id: a digest of session, tool and input; no subagent threads.
    return common.call_of(AGENT, payload, threads=False)


def post_image(tool: str, pre: bytes | None, tool_input: Mapping[str, Any],
               path: str) -> bytes | None:
    """``write_file``: the content; ``replace``: ``expected_replacements`` (default 1)
    occurrences of ``old_string`` (an empty one on an absent file creates it)."""
    if tool == "write_file":
        content = tool_input.get("content")
        if not isinstance(content, str):
            raise ToolRefused("write_file: content must be a string")
        return content.encode("utf-8")
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolRefused("replace: old_string and new_string must be strings")
    if old == "" and pre is None:
        return new.encode("utf-8")
    if pre is None:
        raise ToolRefused(f"replace: {path} does not exist")
    text = pre.decode("utf-8", "strict")
    expected = tool_input.get("expected_replacements", 1)
    count = text.count(old) if old else 0
    if not isinstance(expected, int) or count != expected:
        raise ToolRefused(f"replace: found {count} occurrence(s) of old_string in {path}, "
                          f"expected {expected}")
    return replace(text, old, new, expected > 1, path, "replace").encode("utf-8")


def action(event: str, payload: Mapping[str, Any]) -> Action:
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    if event in ("BeforeTool", "AfterTool"):
        call = call_of(payload)
        response = payload.get("tool_response")
        error = response.get("error") if isinstance(response, dict) else None
        failed = str(error) if error else None
        if tool in FILE_TOOLS:
            path = tool_input.get("file_path") or tool_input.get("absolute_path")
            if not isinstance(path, str) or not path:
                return Ignore(f"{tool}: no file_path")
            if event == "AfterTool":
                return Close(call, (path,), failed)
            name = str(tool)

            def bind(rel: Sequence[str]) -> Compute:
                def compute(pre: tuple[bytes | None, ...]) -> tuple[bytes | None, ...]:
                    try:
                        return (post_image(name, pre[0], tool_input, rel[0]),)
                    except UnicodeDecodeError:
                        raise ToolRefused(f"{name}: {rel[0]} is not UTF-8 text") from None
                return compute

            return FileStep(call, (path,), bind)
        if tool in SHELL_TOOLS:
            if event == "BeforeTool":
                return ShellStep(call, str(tool_input.get("command") or ""))
            return Close(call, (), failed)
        return Ignore(f"tool {tool!r} is not logged")
    if event == "SessionStart":
        return SessionStart(str(payload.get("source") or "startup"))
    if event == "PreCompress":
        # Advisory: Gemini does not wait, so "manual" must never be answered by a block.
        return PreCompact("auto")
    if event == "AfterAgent":
        return TurnEnd()
    return Ignore(f"event {event!r} is not handled")


def groups(command: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event, matcher in EVENTS.items():
        handler = {"type": "command", "command": command, "timeout": TIMEOUT_MS,
                   "name": f"gitwal-{event}"}
        out[event] = ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}
    return out
