"""One hook call, in process: payload bytes in, (exit code, stdout, stderr) out.

This is the simple, always-correct path (``git wal hook AGENT``); the fast
path (client.py, server.py) runs the same function in a long-lived process.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

from .engine import Reply, Session, perform
from .external import External

AGENTS = ("claude", "codex", "gemini")


def adapter(agent: str) -> ModuleType:
    """The adapter module of ``agent`` (imported on demand: one per hook call)."""
    if agent not in AGENTS:
        raise KeyError(agent)
    return importlib.import_module(f"{__package__}.{agent}")


def run_hook(agent: str, data: bytes, event: str | None = None,
             cwd: str | None = None, served: bool = False) -> tuple[int, str, str]:
    """Handle one hook call of ``agent``; ``event`` defaults to the payload's."""
    mod = adapter(agent)
    try:
        payload: Any = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as e:
        payload = None
        problem = f"gitwal: the hook input is not JSON ({e})"
    if not isinstance(payload, dict):
        name = event or "?"
        problem = locals().get("problem") or "gitwal: the hook input is not a JSON object"
        blocks = name in getattr(mod, "BLOCKING", ("PreToolUse",))
        return _render(mod, name, Reply(block=problem) if blocks else Reply(error=problem))
    name = event or str(payload.get("hook_event_name") or "")
    action = mod.action(name, payload)
    session = Session.open(payload.get("cwd") if isinstance(payload.get("cwd"), str)
                           else cwd, mod.AGENT, mod.PREFIX, str(payload.get("session_id") or ""),
                           served, frozenset(getattr(mod, "ASYNC_CLOSE", ())))
    if session is None:
        return _render(mod, name, Reply())  # not in a git working tree: nothing to log
    return _render(mod, name, perform(session, action, name))


def _render(mod: ModuleType, event: str, reply: Reply) -> tuple[int, str, str]:
    code, out, err = mod.render(event, reply)
    return int(code), str(out), str(err)


def check_after(agent: str, data: bytes, cwd: str | None = None) -> None:
    """After a closing hook the server has answered: compare the whole tree with
    the log's expectation, off the agent's critical path (docs/agents.md)."""
    mod = adapter(agent)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return
    if not isinstance(payload, dict):
        return
    event = str(payload.get("hook_event_name") or "")
    if event not in getattr(mod, "CLOSING", ()):
        return
    session = Session.open(payload.get("cwd") if isinstance(payload.get("cwd"), str)
                           else cwd, mod.AGENT, mod.PREFIX, str(payload.get("session_id") or ""),
                           served=True)
    if session is None or session.config.tree_check != "auto" or not session.exists():
        return
    run = session.wal.run(session.run_id)
    External(run, full_check=True).check(f"{mod.AGENT} tree check after {event}")
