"""What the agent adapters share: naming a call from its payload, and the reply
protocol Claude Code defined and Codex and Gemini CLI follow.

An adapter (claude.py, codex.py, gemini.py) imports this module, the actions
(actions.py) and the call vocabulary, never another adapter.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .actions import Reply
from .call import Call


def call_id(payload: Mapping[str, Any]) -> str:
    """The agent's id of a tool call (``tool_use_id``); a payload without one (older
    Claude Code, Gemini CLI) gets a digest of the session, the tool and its input,
    which the opening and the closing hook of the call share."""
    given = payload.get("tool_use_id")
    if isinstance(given, str) and given:
        return given
    raw = json.dumps([payload.get("session_id"), str(payload.get("tool_name") or ""),
                      payload.get("tool_input")], sort_keys=True)
    return "h" + hashlib.sha1(raw.encode()).hexdigest()[:24]


def call_of(agent: str, payload: Mapping[str, Any], threads: bool = True) -> Call:
    """The call a tool payload of ``agent`` stands for. ``threads``: the payload's
    ``agent_id`` (a subagent) names the call's thread; else there is one thread."""
    thread = payload.get("agent_id") if threads else None
    turn = payload.get("turn_id")  # Codex names the turn; others start one (turns.py)
    return Call(agent, str(payload.get("tool_name") or ""), call_id(payload),
                thread if isinstance(thread, str) else None,
                turn if isinstance(turn, str) and turn else None)


def render(event: str, reply: Reply) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) in Claude Code's hook protocol: exit 2 with the
    reason on stderr blocks; ``hookSpecificOutput.additionalContext`` is context
    for the model, ``systemMessage`` a warning for the user; exit 1 is an error
    that blocks nothing."""
    if reply.block is not None:
        return 2, "", reply.block + "\n"
    out: dict[str, Any] = {}
    if reply.context:
        out["hookSpecificOutput"] = {"hookEventName": event,
                                     "additionalContext": reply.context}
    if reply.ask:  # PreToolUse: the user allows or denies the call in the agent
        out.setdefault("hookSpecificOutput", {"hookEventName": event}).update(
            permissionDecision="ask", permissionDecisionReason=reply.ask)
    if reply.warning:
        out["systemMessage"] = reply.warning
    stdout = json.dumps(out, ensure_ascii=False) + "\n" if out else ""
    if reply.error:
        return 1, stdout, reply.error + "\n"
    return 0, stdout, (reply.warning + "\n") if reply.warning else ""
