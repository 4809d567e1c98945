"""The contract of an agent adapter, and finding one by the name users type.

An adapter is a module (claude.py, codex.py, gemini.py) that turns its
agent's hook payloads into the engine's actions and the engine's replies into
its agent's protocol; hook.py, the hook server and `git wal install` reach it
only through :class:`Adapter`. mypy checks that every adapter module keeps
the contract (the ``TYPE_CHECKING`` block below); the modules are imported
on demand at run time, one per hook call.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .actions import Action, Reply
from .call import Call

# What `git wal install AGENT` merges into the agent's settings: event -> one
# matcher group, or a list of them (agents/install.py).
Groups = dict[str, dict[str, Any]] | dict[str, list[dict[str, Any]]]

AGENTS = ("claude", "codex", "gemini")  # the names `git wal install|hook` take


@runtime_checkable
class Adapter(Protocol):
    """What every adapter module provides (read-only constants and four functions)."""

    @property
    def AGENT(self) -> str:
        """The agent's name in records (``args.agent.name``): "claude-code", ..."""

    @property
    def PREFIX(self) -> str:
        """The prefix of its sessions' run ids (``<prefix>-<session id>``)."""

    @property
    def EVENTS(self) -> Mapping[str, str | None]:
        """The events `git wal install` registers -> their matcher (None: none)."""

    @property
    def BLOCKING(self) -> tuple[str, ...]:
        """Events whose hook can refuse what comes next (a refusal is a block)."""

    @property
    def CLOSING(self) -> tuple[str, ...]:
        """Events that close a call (the hook server checks the tree after them)."""

    @property
    def ASYNC_CLOSE(self) -> tuple[str, ...]:
        """Tools whose closing hook runs in the background (may come late)."""

    @property
    def INSTALL_NOTE(self) -> str:
        """One line `git wal install` prints after installing ("" for none)."""

    def call_of(self, payload: Mapping[str, Any]) -> Call:
        """The tool call a payload stands for."""

    def action(self, event: str, payload: Mapping[str, Any]) -> Action:
        """What the engine is to do for one hook call."""

    def render(self, event: str, reply: Reply) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) in the agent's hook protocol."""

    def groups(self, command: str) -> Groups:
        """The matcher groups `git wal install` adds, each running ``command``."""


def adapter(agent: str) -> Adapter:
    """The adapter of ``agent`` (one of :data:`AGENTS`; KeyError otherwise)."""
    if agent not in AGENTS:
        raise KeyError(agent)
    mod: ModuleType = importlib.import_module(f"{__package__}.{agent}")
    if not isinstance(mod, Adapter):  # only a module edited against the contract
        raise TypeError(f"{mod.__name__} does not provide the agent adapter contract")
    return mod


if TYPE_CHECKING:  # mypy: each adapter module satisfies the contract
    from . import claude, codex, gemini

    _KEPT: tuple[Adapter, ...] = (claude, codex, gemini)
