"""Gemini CLI: hook payloads -> actions, replies -> exit code and JSON.

Gemini CLI reads hooks from ``.gemini/settings.json`` (project) and
``~/.gemini/settings.json`` (user), in the event -> matcher group ->
handlers shape (``timeout`` in milliseconds). Every payload carries
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and
``timestamp``; ``BeforeTool`` adds ``tool_name`` and ``tool_input``,
``AfterTool`` also ``tool_response`` (with ``error`` when the tool failed),
``SessionStart`` ``source``, ``PreCompress`` ``trigger``, ``AfterAgent``
``prompt``, ``prompt_response`` and ``stop_hook_active`` (as Gemini CLI
0.61.0 sends them: tests/fixtures/gemini-0.61.0/).

Tool payloads carry no call id: the call is identified by a digest of the
session, the tool and its input, which ``BeforeTool`` and ``AfterTool``
share; an identical later call gets a new intent (only an open intent
counts as "already logged").

``PreCompress`` cannot block anything (Gemini ignores its reply) and fires
with trigger ``auto`` before every model request, before Gemini decides
whether the history needs compressing at all: gitwal settles what is open
then, quietly, and checkpoints only when the transcript shows a compression
is due (gemini_compress) or at ``manual`` (``/compress``), which always
compresses (docs/agents.md).

``run_shell_command`` runs in ``dir_path`` (relative to the project) when
given, and reports a non-zero exit as ``Exit Code: N`` in its text for the
model: the exec intent records that directory, its commit that exit code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..base.errors import ToolRefused
from . import common, gemini_compress, gemini_edit, gemini_trust
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

AGENT = "gemini-cli"
PREFIX = "gemini"
SHELL_TOOLS = ("run_shell_command",)
FILE_TOOLS = ("write_file", "replace")
MATCHER = "write_file|replace|run_shell_command"
EVENTS: dict[str, str | None] = {
    "BeforeTool": MATCHER,
    "AfterTool": MATCHER,
    "SessionStart": None,
    "BeforeAgent": None,
    "PreCompress": None,
    "AfterAgent": None,
}
TIMEOUT_MS = 60000
TIMEOUTS_MS = {"AfterAgent": 600000}  # the user's done check (done.py) may take long
CLOSING = ("AfterTool",)
BLOCKING = ("BeforeTool",)
ASYNC_CLOSE: tuple[str, ...] = ()  # every closing hook is synchronous
render = common.render  # Gemini CLI follows Claude Code's reply protocol
INSTALL_NOTE = ("Gemini CLI runs these hooks unless its settings turn hooks off "
                "(`hooksConfig.enabled: false`, or a hook listed in `hooksConfig.disabled`); "
                "`git wal doctor` checks both.")

__all__ = ["AGENT", "ASYNC_CLOSE", "BLOCKING", "CLOSING", "EVENTS", "INSTALL_NOTE", "PREFIX",
           "action", "call_of", "groups", "render"]


def call_of(payload: Mapping[str, Any]) -> Call:
    # No tool_use_id: a digest of session, tool and input; no subagent threads.
    return common.call_of(AGENT, payload, threads=False)


def post_image(tool: str, pre: bytes | None, tool_input: Mapping[str, Any],
               path: str, payload: Mapping[str, Any] | None = None) -> bytes | None:
    """What Gemini CLI writes (gemini_edit): ``write_file`` the content, ``replace``
    its matching rules; ToolRefused where that cannot be known in advance."""
    if tool == "write_file":
        content = tool_input.get("content")
        if not isinstance(content, str):
            raise ToolRefused("write_file: content must be a string")
        keeps = (gemini_edit.has_escapes(content, path) and payload is not None
                 and gemini_edit.keeps_escapes(reply_model(payload), llm_correction(payload)))
        return gemini_edit.write_post(pre, content, path, keeps)
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolRefused("replace: old_string and new_string must be strings")
    return gemini_edit.replace_post(pre, old, new, tool_input.get("allow_multiple") is True)


def reply_model(payload: Mapping[str, Any]) -> str | None:
    """The model of the newest reply in the session's transcript: the one whose call
    this is."""
    transcript = payload.get("transcript_path")
    found = gemini_compress.last_reply(Path(transcript)) if isinstance(transcript, str) \
        and transcript else None
    return found[1] if found else None


def llm_correction(payload: Mapping[str, Any]) -> bool:
    """``tools.disableLLMCorrection`` set to false in Gemini's settings."""
    cwd = payload.get("cwd")
    top = Path(cwd) if isinstance(cwd, str) and cwd else None
    value, _ = gemini_trust.setting(gemini_trust.layers(top, os.environ),
                                    "tools", "disableLLMCorrection")
    return value is False


_EXIT = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)
_SIGNAL = re.compile(r"^Signal: (\S+)$", re.MULTILINE)


def shell_outcome(response: object) -> str:
    """How ``run_shell_command`` ended, from the text it gives the model: Gemini adds
    ``Exit Code: N`` (and ``Signal: S``) after the output only when N is not 0."""
    content = response.get("llmContent") if isinstance(response, dict) else None
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        return "finished"
    # The command's own output comes first: the last such line is Gemini's.
    codes, signals = _EXIT.findall(content), _SIGNAL.findall(content)
    if signals:
        return f"signal {signals[-1]}"
    if codes:
        return f"exit code {codes[-1]}"
    return "finished"


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
                        return (post_image(name, pre[0], tool_input, rel[0], payload),)
                    except UnicodeDecodeError:
                        raise ToolRefused(f"{name}: {rel[0]} is not UTF-8 text") from None
                return compute

            return FileStep(call, (path,), bind)
        if tool in SHELL_TOOLS:
            if event == "BeforeTool":
                where = tool_input.get("dir_path")
                return ShellStep(call, str(tool_input.get("command") or ""),
                                 where if isinstance(where, str) and where else None)
            return Close(call, (), failed, shell_outcome(response))
        return Ignore(f"tool {tool!r} is not logged")
    if event == "SessionStart":
        return SessionStart(str(payload.get("source") or "startup"))
    if event == "PreCompress":
        # Gemini fires "auto" before every model request, before it decides whether the
        # history needs compressing (most of the time it does not): settle quietly, like
        # at the end of a turn, and secure the log only when the transcript says it will
        # compress (gemini_compress). "manual" (/compress) always compresses. Gemini
        # ignores a PreCompress reply, so it is never answered by a block.
        if payload.get("trigger") == "manual" or gemini_compress.about_to_compress(payload):
            return PreCompact("auto")
        return TurnEnd(whole_tree=False)
    if event == "BeforeAgent":  # once per user prompt (its prompt_id): a new turn
        return TurnStart()
    if event == "AfterAgent":  # Gemini sends a refusal's reason as the next prompt
        return TurnEnd(gate=True, continuing=payload.get("stop_hook_active") is True)
    return Ignore(f"event {event!r} is not handled")


def groups(command: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event, matcher in EVENTS.items():
        handler = {"type": "command", "command": command,
                   "timeout": TIMEOUTS_MS.get(event, TIMEOUT_MS), "name": f"gitwal-{event}"}
        out[event] = ({"matcher": matcher} if matcher else {}) | {"hooks": [handler]}
    return out
