"""What an adapter asks for, and what it gets back.

An adapter (claude.py, codex.py, gemini.py) turns a payload into one
:class:`Action`; engine.py performs it and returns a :class:`Reply`, which the
adapter renders in its agent's protocol (exit codes, JSON). Both are plain
values: what the call is, and what to tell the agent; the policy is engine.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .call import Call, Outcome

Content = bytes | None
Compute = Callable[[tuple[Content, ...]], tuple[Content, ...]]


@dataclass(frozen=True)
class FileStep:
    """A call that sets files to contents computable now (Edit, Write, a patch)."""

    call: Call
    paths: tuple[str, ...]  # absolute or relative to cwd, as the agent gave them
    compute: Callable[[Sequence[str]], Compute]  # tree-relative paths -> compute


@dataclass(frozen=True)
class ShellStep:
    """A call whose effect is unknown in advance (Bash)."""

    call: Call
    command: str
    directory: str | None = None  # where it runs, when not the agent's cwd (Gemini's dir_path)


@dataclass(frozen=True)
class Close:
    """The call is over: ``error`` is None when it succeeded.

    ``outcome`` words a shell call's end from what the payload carries: "exit
    code 3" where the agent reports the status, "finished" where it does not
    (a shell step that ran is committed either way: its effects happened).
    """

    call: Call
    paths: tuple[str, ...] = ()  # the files it targeted (absolute); () for a shell call
    error: str | None = None
    outcome: str = "tool succeeded"


@dataclass(frozen=True)
class SessionStart:
    source: str  # startup | resume | clear | compact | fork


@dataclass(frozen=True)
class PreCompact:
    trigger: str  # manual | auto


@dataclass(frozen=True)
class TurnEnd:
    """The agent finished a turn (Stop): settle and check the tree.

    ``whole_tree`` False: a point between two model requests (Gemini's
    PreCompress), where the tree is compared as at a tool call
    (``wal.agent.treeCheck``), not walked whatever its size. ``gate``: the
    agent lets this hook refuse the stop, so the turn ends only with proof
    (done.py); ``continuing``: it goes on because a stop hook refused its last
    stop (``stop_hook_active``); ``thread``: the subagent stopping."""

    whole_tree: bool = True
    gate: bool = False
    continuing: bool = False
    thread: str | None = None


@dataclass(frozen=True)
class TurnStart:
    """The user submitted a prompt (Claude Code UserPromptSubmit): a new turn."""


@dataclass(frozen=True)
class Ignore:
    why: str = ""


Action = (FileStep | ShellStep | Close | SessionStart | PreCompact | TurnStart | TurnEnd
          | Ignore)


@dataclass(frozen=True)
class Reply:
    block: str | None = None  # refuse the call / the compaction, with this reason
    context: str | None = None  # text for the model
    warning: str | None = None  # text for the user
    error: str | None = None  # a failure that blocks nothing (the agent goes on)
    ask: str | None = None  # let the user allow or deny the call, with this reason
    outcome: Outcome | None = field(default=None, compare=False)
