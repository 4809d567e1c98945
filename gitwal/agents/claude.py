"""Claude Code: hook payloads -> actions, replies -> exit code and JSON.

Payload shapes (Claude Code hooks reference): every event carries
``session_id``, ``transcript_path``, ``cwd`` and ``hook_event_name``; tool
events add ``tool_name``, ``tool_input`` and ``tool_use_id`` (file paths in
``tool_input`` are absolute), PostToolUse adds ``tool_response``,
PostToolUseFailure ``error`` (and ``is_interrupt``), SessionStart
``source``, PreCompact ``trigger`` (``manual`` | ``auto``). A call made by
a subagent carries ``agent_id``.

Replies: exit 2 with the reason on stderr blocks a PreToolUse call or a
PreCompact, and makes the agent go on instead of stopping at ``Stop`` and
``SubagentStop`` (whose payloads carry ``stop_hook_active``: true when it goes
on because a stop hook refused its last stop);
``hookSpecificOutput.additionalContext`` gives SessionStart context;
``systemMessage`` warns the user; any other non-zero exit is a
non-blocking error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import common, edits
from .actions import (
    Action,
    Close,
    Compute,
    FileStep,
    Ignore,
    PreCompact,
    SessionStart,
    ShellStep,
    TurnEnd,
    TurnStart,
)
from .call import Call

AGENT = "claude-code"
PREFIX = "claude"
FILE_TOOLS = {
    "Edit": ("file_path", edits.edit),
    "MultiEdit": ("file_path", edits.multi_edit),
    "Write": ("file_path", edits.write),
    "NotebookEdit": ("notebook_path", edits.notebook_edit),
}
SHELL_TOOLS = ("Bash", "PowerShell")
CLOSING = ("PostToolUse", "PostToolUseFailure")  # the server checks the tree after these
BLOCKING = ("PreToolUse", "PreCompact")
# PostToolUse of a file tool runs in the background (`"async": true`): the agent
# does not wait for it. The next hook of the run waits for it instead when the
# tool did change its file (External.closing_may_come), so a commit is never
# replaced by a guess from the tree. A shell call's PostToolUse stays
# synchronous: a command that changed nothing looks like one that never ran.
ASYNC_CLOSE = ("Edit", "MultiEdit", "Write", "NotebookEdit")
_FILES = "|".join(FILE_TOOLS)
_SHELLS = "|".join(SHELL_TOOLS)
# What `git wal install claude` registers: event -> matcher (None: no matcher).
EVENTS: dict[str, str | None] = {
    "PreToolUse": f"{_FILES}|{_SHELLS}",
    "PostToolUse": f"{_FILES}|{_SHELLS}",
    "PostToolUseFailure": f"{_FILES}|{_SHELLS}",
    "SessionStart": None,
    "UserPromptSubmit": None,
    "PreCompact": None,
    "Stop": None,
    "SubagentStop": None,
}
# seconds; others: DEFAULT_TIMEOUT. A turn's end may run the user's check
# (wal.done.check, done.py), which gets done.CHECK_TIMEOUT of these 600.
TIMEOUTS = {"SessionStart": 120, "PreCompact": 120, "Stop": 600, "SubagentStop": 600}
DEFAULT_TIMEOUT = 60
INSTALL_NOTE = ""
render = common.render  # Claude Code's reply protocol is the shared one


def call_of(payload: Mapping[str, Any]) -> Call:
    return common.call_of(AGENT, payload)


def _compute(fn: Any, tool_input: Mapping[str, Any]) -> Any:
    def bind(paths: Sequence[str]) -> Compute:
        def compute(pre: tuple[bytes | None, ...]) -> tuple[bytes | None, ...]:
            return (fn(pre[0], tool_input, paths[0]),)
        return compute
    return bind


def action(event: str, payload: Mapping[str, Any]) -> Action:
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    if event in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
        call = call_of(payload)
        if tool in FILE_TOOLS:
            key, fn = FILE_TOOLS[str(tool)]
            path = tool_input.get(key)
            if not isinstance(path, str) or not path:
                return Ignore(f"{tool}: no {key}")
            if event == "PreToolUse":
                return FileStep(call, (path,), _compute(fn, tool_input))
            error = None
            if event == "PostToolUseFailure":
                error = str(payload.get("error") or "the tool failed")
            return Close(call, (path,), error)
        if tool in SHELL_TOOLS:
            if event == "PreToolUse":
                return ShellStep(call, str(tool_input.get("command") or ""))
            error = None
            if event == "PostToolUseFailure":
                error = str(payload.get("error") or "the command failed")
            return Close(call, (), error)
        return Ignore(f"tool {tool!r} is not logged")
    if event == "SessionStart":
        return SessionStart(str(payload.get("source") or "startup"))
    if event == "PreCompact":
        return PreCompact(str(payload.get("trigger") or "manual"))
    if event in ("Stop", "SubagentStop"):
        # Both can refuse the stop (exit 2): the turn ends only with proof (done.py).
        thread = payload.get("agent_id")
        return TurnEnd(gate=True, continuing=payload.get("stop_hook_active") is True,
                       thread=thread if isinstance(thread, str) and thread else None)
    if event == "UserPromptSubmit":
        return TurnStart()
    return Ignore(f"event {event!r} is not handled")


def groups(command: str) -> dict[str, list[dict[str, Any]]]:
    """The matcher groups `git wal install claude` adds for each event."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event, matcher in EVENTS.items():
        handler = {"type": "command", "command": command,
                   "timeout": TIMEOUTS.get(event, DEFAULT_TIMEOUT)}
        if event == "PostToolUse":
            out[event] = [{"matcher": _FILES, "hooks": [handler | {"async": True}]},
                          {"matcher": _SHELLS, "hooks": [handler]}]
            continue
        out[event] = [({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}]
    return out
