"""Codex CLI: hook payloads -> actions; the reply protocol is Claude Code's.

Codex reads hooks from ``.codex/hooks.json`` (project) and
``~/.codex/hooks.json`` (user), in the same event -> matcher group ->
handlers shape. Tool events carry ``session_id``, ``turn_id``,
``transcript_path``, ``cwd``, ``hook_event_name``, ``model``, ``tool_name``
(``Bash``, ``apply_patch``, MCP tools), ``tool_use_id`` and ``tool_input``;
for both ``Bash`` and ``apply_patch`` the text is ``tool_input.command``
(the patch itself for ``apply_patch``). PostToolUse adds ``tool_response``:
for a shell call (``exec_command``, reported as ``Bash``) only the command's
output, a string without its exit status, so the call's commit says
"finished"; where a response names its status (an object's ``exit_code``,
or text that starts ``Exit code: N``, as ``apply_patch``'s and the older
``shell`` tool's do) the commit says "exit code N". ``SessionStart``
carries ``source``, ``PreCompact`` ``trigger``. Exit 2 with a reason on
stderr blocks a PreToolUse call. Payloads Codex 0.169.0 sent are kept in
tests/fixtures/codex-0.169.0/.

An ``apply_patch`` call is one intent for every file it adds, updates,
moves or deletes: all post-images are computed from the patch before it
applies (apply_patch.py) and logged together (``write_files``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.errors import WalError
from . import apply_patch, common
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
)
from .call import Call

AGENT = "codex"
PREFIX = "codex"
SHELL_TOOLS = ("Bash", "shell", "local_shell", "exec_command")
PATCH_TOOLS = ("apply_patch",)
MATCHER = "Bash|apply_patch|shell|local_shell|exec_command"
EVENTS: dict[str, str | None] = {
    "PreToolUse": MATCHER,
    "PostToolUse": MATCHER,
    "SessionStart": None,
    "PreCompact": None,
    "Stop": None,
}
TIMEOUT = 60  # seconds
# Stop may run the user's check (wal.done.check, done.py): done.CHECK_TIMEOUT of these.
TIMEOUTS = {"Stop": 600}
CLOSING = ("PostToolUse",)
BLOCKING = ("PreToolUse", "PreCompact")
ASYNC_CLOSE: tuple[str, ...] = ()  # every closing hook is synchronous
render = common.render  # Codex follows Claude Code's reply protocol
# The trust steps `install` prints for Codex are install.next_steps's.
INSTALL_NOTE = ("Codex runs these hooks while its hooks feature is on (the default; "
                "`[features] hooks = false` in a config.toml turns it off).")

__all__ = ["AGENT", "ASYNC_CLOSE", "BLOCKING", "CLOSING", "EVENTS", "INSTALL_NOTE", "PREFIX",
           "action", "call_of", "groups", "render"]


def call_of(payload: Mapping[str, Any]) -> Call:
    return common.call_of(AGENT, payload)


def _text(tool_input: Mapping[str, Any]) -> str:
    for key in ("command", "patch", "input"):
        value = tool_input.get(key)
        if isinstance(value, list):  # a shell call given as argv
            return " ".join(str(v) for v in value)
        if isinstance(value, str):
            return value
    return ""


_EXIT_LINE = re.compile(r"Exit code: (-?\d+)\b")


def outcome(response: Any) -> str:
    """How a shell call ended, in the words of ``Close.outcome``, from its
    ``tool_response``: "exit code N" where it says, else "finished"."""
    if isinstance(response, dict):
        for key in ("exit_code", "exitCode"):
            code = response.get(key)
            if isinstance(code, int) and not isinstance(code, bool):
                return f"exit code {code}"
        response = response.get("output")
    if isinstance(response, str):
        m = _EXIT_LINE.match(response)
        if m:
            return f"exit code {int(m.group(1))}"
    return "finished"


def _patch_step(call: Call, text: str) -> Action:
    ops = apply_patch.parse(text)
    paths = apply_patch.targets(ops)

    def bind(rel: Sequence[str]) -> Compute:
        def compute(pre: tuple[bytes | None, ...]) -> tuple[bytes | None, ...]:
            post = apply_patch.post_images(ops, dict(zip(paths, pre, strict=True)))
            return tuple(post[p] for p in paths)
        return compute

    return FileStep(call, tuple(paths), bind)


def action(event: str, payload: Mapping[str, Any]) -> Action:
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    if event in ("PreToolUse", "PostToolUse"):
        call = call_of(payload)
        if tool in PATCH_TOOLS:
            text = _text(tool_input)
            if event == "PreToolUse":
                try:
                    return _patch_step(call, text)
                except WalError as e:  # an unparseable patch is Codex's to report
                    return Ignore(e.message)
            try:
                paths = tuple(apply_patch.targets(apply_patch.parse(text)))
            except WalError:
                paths = ()
            return Close(call, paths)
        if tool in SHELL_TOOLS:
            if event == "PreToolUse":
                return ShellStep(call, _text(tool_input))
            return Close(call, (), outcome=outcome(payload.get("tool_response")))
        return Ignore(f"tool {tool!r} is not logged")
    if event == "SessionStart":
        return SessionStart(str(payload.get("source") or "startup"))
    if event == "PreCompact":
        return PreCompact(str(payload.get("trigger") or "manual"))
    if event == "Stop":
        # Exit 2 with a reason makes Codex go on (a continuation prompt), like Claude
        # Code: the turn ends only with proof (done.py).
        return TurnEnd(gate=True, continuing=payload.get("stop_hook_active") is True)
    return Ignore(f"event {event!r} is not handled")


def groups(command: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event, matcher in EVENTS.items():
        handler = {"type": "command", "command": command,
                   "timeout": TIMEOUTS.get(event, TIMEOUT)}
        out[event] = ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}
    return out
