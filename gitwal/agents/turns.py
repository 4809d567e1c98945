"""Turns: which user prompt an agent's step answers (`git wal undo --turn N`).

A turn begins when the user submits a prompt. Codex names it in every tool
payload (``turn_id``); Claude Code does not, so its ``UserPromptSubmit`` hook
starts a new turn here: a counter per run in ``<git dir>/wal/turns/<run>``,
written durably, read by the run's next tool hooks. Each agent intent carries
its turn in ``args.agent.turn`` (docs/format.md), so the log alone says what
the agent did for each prompt; this file is only where the number waits
between two hook processes.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from ..base.durable import atomic_write, makedirs_durable
from ..base.repository import wal_dir

__all__ = ["current", "start"]


def _path(repo: pygit2.Repository, run: str) -> Path:
    return wal_dir(repo) / "turns" / run


def current(repo: pygit2.Repository, run: str) -> str | None:
    """The run's current turn ("1", "2", ...), or None before its first prompt."""
    try:
        text = _path(repo, run).read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return text if text.isdigit() else None


def start(repo: pygit2.Repository, run: str) -> str:
    """Begin the run's next turn; returns its number."""
    path = _path(repo, run)
    if not path.parent.is_dir():
        makedirs_durable(path.parent)
    turn = str(int(current(repo, run) or 0) + 1)
    atomic_write(path, f"{turn}\n".encode(), tag="gitwal")
    return turn
