"""One hook call, in process: payload bytes in, (exit code, stdout, stderr) out.

This is the simple, always-correct path (``git wal hook AGENT``); the fast
path (client.py, server.py) runs the same function in a long-lived process.
Adapters are reached through their contract (adapter.py).
"""

from __future__ import annotations

import json
from typing import Any

from .actions import Reply
from .adapter import AGENTS, Adapter, adapter
from .engine import perform
from .external import External
from .session import Session

__all__ = ["AGENTS", "Adapter", "adapter", "can_refuse", "check_after", "run_hook"]


def run_hook(agent: str, data: bytes, event: str | None = None,
             cwd: str | None = None, served: bool = False) -> tuple[int, str, str]:
    """Handle one hook call of ``agent``; ``event`` defaults to the payload's."""
    a = adapter(agent)
    try:
        payload: Any = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as e:
        payload = None
        problem = f"gitwal: the hook input is not JSON ({e})"
    if not isinstance(payload, dict):
        name = event or "?"
        problem = locals().get("problem") or "gitwal: the hook input is not a JSON object"
        blocks = name in a.BLOCKING
        return a.render(name, Reply(block=problem) if blocks else Reply(error=problem))
    name = event or str(payload.get("hook_event_name") or "")
    action = a.action(name, payload)
    session = _session(a, payload, cwd, served)
    if session is None:
        return a.render(name, Reply())  # not in a git working tree: nothing to log
    return a.render(name, perform(session, action, name))


def can_refuse(agent: str, data: bytes) -> bool:
    """Whether a hook call whose handling failed must refuse what comes next: the
    events that can refuse a call (the WAL rule), never a turn's end (a refused
    stop keeps the agent running: that is for gitwal's decisions only)."""
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return True
    event = payload.get("hook_event_name") if isinstance(payload, dict) else None
    try:
        return not isinstance(event, str) or event in adapter(agent).BLOCKING
    except KeyError:  # not an agent gitwal knows
        return True


def _session(a: Adapter, payload: dict[str, Any], cwd: str | None,
             served: bool) -> Session | None:
    """The session of a payload: its ``cwd`` (else ``cwd``) and ``session_id``."""
    where = payload.get("cwd")
    return Session.open(where if isinstance(where, str) else cwd, a.AGENT, a.PREFIX,
                        str(payload.get("session_id") or ""), served,
                        frozenset(a.ASYNC_CLOSE))


def check_after(agent: str, data: bytes, cwd: str | None = None) -> None:
    """After a closing hook the server has answered: compare the whole tree with
    the log's expectation, off the agent's critical path (docs/agents.md)."""
    a = adapter(agent)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return
    if not isinstance(payload, dict):
        return
    event = str(payload.get("hook_event_name") or "")
    if event not in a.CLOSING:
        return
    session = _session(a, payload, cwd, served=True)
    if session is None or session.config.tree_check != "auto" or not session.exists():
        return
    run = session.wal.run(session.run_id)
    External(run, full_check=True).check_quietly(f"{a.AGENT} tree check after {event}")
