"""What the agent hooks read from the local user's git config (``wal.agent.*``,
``wal.irreversible``, git's ``alias.*``; docs/agents.md): never from a log, so a fetched log
cannot change how the hooks behave."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..shellwords.unwrap import aliases_of

__all__ = ["TREE_CHECK_LIMIT", "Config", "git_aliases"]

TREE_CHECK_LIMIT = 2000  # index entries up to which every hook compares the whole tree


@dataclass(frozen=True)
class Config:
    fail_open: bool = False
    redo: bool = False  # SessionStart recovery redoes replay-safe steps
    open_wait: float = 5.0  # seconds to wait for another thread's closing hook
    tree_check: str = "auto"  # always | auto | shell
    tree_check_limit: int = TREE_CHECK_LIMIT
    detached: bool = True  # PreCompact checkpoints under refs/wal-checkpoints/
    block_auto_compact: bool = False
    irreversible: tuple[str, ...] = ()  # wal.irreversible: shell commands a person approves
    aliases: tuple[tuple[str, str], ...] = ()  # git's alias.*: what `git NAME` runs

    @property
    def alias_map(self) -> dict[str, str]:
        return dict(self.aliases)

    @classmethod
    def of(cls, repo: pygit2.Repository) -> Config:
        c = repo.config

        def flag(key: str, default: bool) -> bool:
            try:
                return bool(c.get_bool(key))
            except (KeyError, pygit2.GitError, ValueError):
                return default

        def text(key: str, default: str) -> str:
            try:
                return str(c[key])
            except (KeyError, pygit2.GitError):
                return default

        def number(key: str, default: float) -> float:
            try:
                return float(text(key, str(default)))
            except ValueError:
                return default

        return cls(
            fail_open=flag("wal.agent.failOpen", False),
            redo=flag("wal.agent.redo", False),
            open_wait=max(0.0, number("wal.agent.openWait", 5.0)),
            tree_check=text("wal.agent.treeCheck", "auto"),
            tree_check_limit=int(number("wal.agent.treeCheckLimit", TREE_CHECK_LIMIT)),
            detached=text("wal.agent.checkpoint", "detached") != "branch",
            block_auto_compact=flag("wal.agent.blockAutoCompact", False),
            irreversible=_patterns(c, "wal.irreversible"),
            aliases=git_aliases(c),
        )


def _patterns(config: pygit2.Config, key: str) -> tuple[str, ...]:
    """Every value of a multi-valued key (the local user's config, never a log's)."""
    try:
        return tuple(str(v) for v in config.get_multivar(key) if str(v).strip())
    except (KeyError, pygit2.GitError):
        return ()


def git_aliases(config: pygit2.Config) -> tuple[tuple[str, str], ...]:
    """git's ``alias.*`` (the local user's config): what ``git NAME`` runs."""
    try:
        return tuple(aliases_of((str(e.name), e.value) for e in config).items())
    except pygit2.GitError:
        return ()


def codex_home() -> Path:
    """Where Codex keeps its user files: ``$CODEX_HOME``, else ``~/.codex``."""
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path(os.path.expanduser("~")) / ".codex"
