"""The vocabulary of agent steps: which call an intent stands for, what a hook
call appended, and the marks an agent step leaves in its records.

Kept apart from the step logic (agents/external.py) so that readers of records
(verify, the resume context) need not load it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records.model import Intent, Record


@dataclass(frozen=True)
class Call:
    """One tool call of an agent, as its hooks name it."""

    agent: str  # "claude-code", "codex", "gemini-cli"
    tool: str  # the agent's tool name: "Edit", "Bash", "apply_patch", ...
    call_id: str  # the agent's id of the call (Claude: tool_use_id)
    thread: str | None = None  # subagent id; calls of one thread run one at a time
    turn: str | None = None  # the user prompt it answers (agents/turns.py)

    def tag(self) -> dict[str, str]:
        out = {"name": self.agent, "tool": self.tool, "call": self.call_id}
        if self.thread:
            out["thread"] = self.thread
        if self.turn:
            out["turn"] = self.turn
        return out

    def who(self, event: str) -> str:
        return f"{self.agent} {event} {self.tool}"


@dataclass(frozen=True)
class Outcome:
    """What a hook call appended (for the hook's reply and for tests)."""

    appended: tuple[Record, ...]
    intent: Intent | None = None
    note: str = ""  # one line for the agent or the user, or ""

    def of(self, kind: type[Record]) -> list[Record]:
        return [r for r in self.appended if isinstance(r, kind)]
