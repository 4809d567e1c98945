"""Record types: the frozen dataclasses of every record, their constants, and
the marks an agent's hook call leaves in them (docs/format.md is the normative
description of the fields). How a record becomes bytes, and bytes a record:
codec.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base.ids import UNKNOWN, Lsn, RunId

FORMAT_VERSION = 1  # the ``v`` of every record (codec.py)
REPLAY_SAFE = "safe"
REPLAY_UNSAFE = "unsafe"
EXEC_TOOL = "exec"


@dataclass(frozen=True, slots=True)
class Plan:
    """LSN 1 of every run: what the run is for and where it started."""

    run: RunId
    lsn: Lsn
    task: str
    base: str  # commit id of HEAD when the run began
    branch: str | None  # None when HEAD was detached
    steps: tuple[str, ...] = ()
    # The worktree the run started in and is bound to: (name, path). name is
    # the linked worktree's name under <common dir>/worktrees/, "" for the
    # main one. None: a log written before runs were bound (encoded only when set).
    worktree: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Intent:
    """A step about to change the working tree; durable before the change."""

    run: RunId
    lsn: Lsn
    tool: str
    args: dict[str, Any]
    target: tuple[str, ...]  # paths, relative to the work tree ("." for exec)
    pre: tuple[str, ...]  # per target: object id or ABSENT (exec: one tree id)
    post: tuple[str, ...] | None  # per target; None when not known in advance
    mode: tuple[int, ...]  # per target: git file mode of the pre-image, 0 if absent
    replay: str
    key: str  # idempotency key "<run>:<lsn>"
    check: str | None = None
    step: int | None = None  # the plan step (1-based) this intent carries out
    # HMAC-SHA256 of the intent without it, keyed by this clone's secret
    # (authorship.py): present on every intent gitwal writes, and on every
    # commit, abort, approval and claim (MACED). Encoded only when present,
    # so a log without it keeps its bytes.
    auth: str | None = None
    # Targets whose images the log withholds (untracked secret-looking files,
    # gitwal/worktree/secrets.py): their pre and post ids are hashes only, no append
    # keeps those blobs, so no reader can restore them. Encoded only when set.
    withheld: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Commit:
    """Closes an intent: the effect landed and was verified."""

    run: RunId
    lsn: Lsn
    intent: Lsn
    post: tuple[str, ...]  # observed post state (exec: the post tree id)
    verified: str
    recovered: bool = False
    # A person's decision (`git wal resolve`): who ("Name <email>") and why.
    decided_by: str = ""
    note: str = ""
    # exec only: (path, run, LSN) of each path its trees differ in that another
    # run's step (LSN: its intent) committed while it ran, so not its effect
    # (shell_among.py); and (path, run, LSN of the claim) of each path it
    # changed that another live run claimed. Encoded only when not empty.
    theirs: tuple[tuple[str, str, int], ...] = ()
    claimed: tuple[tuple[str, str, int], ...] = ()
    auth: str | None = None  # as in Intent: this clone's MAC (trust/authority.py)


@dataclass(frozen=True, slots=True)
class Abort:
    """Closes an intent that did not land, failed verification, or was abandoned."""

    run: RunId
    lsn: Lsn
    intent: Lsn
    reason: str
    restored: tuple[str, ...] = ()  # paths put back to their pre-image
    output: str = ""  # tail of a failed check's output
    # (path, object id): what gitwal saved before it overwrote bytes it had
    # not written (a blob), or the snapshot a shell step's restore undid
    # (path ".", a tree); the append keeps each object alive.
    saved: tuple[tuple[str, str], ...] = ()
    decided_by: str = ""  # a person's decision (`git wal resolve`): who, and why
    note: str = ""
    theirs: tuple[tuple[str, str, int], ...] = ()  # as in Commit: never restored
    claimed: tuple[tuple[str, str, int], ...] = ()  # as in Commit
    auth: str | None = None  # as in Intent


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The working tree as of ``covers`` is an ordinary git commit.

    Readers that need the current state start here: nothing before it is
    needed for recovery, so the records before it may be archived.
    """

    run: RunId
    lsn: Lsn
    git: str  # the checkpoint commit
    tree: str  # its tree (kept reachable by the log itself)
    ref: str  # where the commit lives: the branch, or refs/wal-checkpoints/<run>/<lsn>
    covers: int  # LSN of the last committed intent it includes (0: none)
    plan: str  # blob id of the run's plan record, so readers need not walk to LSN 1
    committed: int  # committed intents in the run up to here
    done_steps: tuple[int, ...] = ()  # plan steps carried out up to here
    unlogged: tuple[str, ...] = ()  # paths included that no step explains


@dataclass(frozen=True, slots=True)
class Unlogged:
    """The tree changed without a durable intent (a hook that timed out or
    failed open, an edit made before the hooks were installed): recorded when
    noticed, so the log has no silent gap. It closes nothing and explains the
    change only as "seen", never as verified."""

    run: RunId
    lsn: Lsn
    paths: tuple[str, ...]  # paths whose state differs from the log's expectation
    expected: tuple[str, ...]  # per path: what the log expected (object id or ABSENT)
    observed: tuple[str, ...]  # per path: what was found (kept alive by the append)
    noticed: str  # who noticed, e.g. "claude-code PreToolUse Edit"
    # Paths among ``paths`` whose found state another run's step left (or, in
    # flight, is writing): (path, run, LSN of that step's intent). Logged
    # there, not here: not someone's unlogged edit (shell_among.py).
    theirs: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Seal:
    """The run's last record, signed: a log whose tail was cut is not sealed.

    ``last`` and ``head`` name the record and the append commit sealed, ``tree``
    the working tree then; nothing may be appended after a seal."""

    run: RunId
    lsn: Lsn
    last: int  # LSN of the record before the seal (== lsn - 1)
    head: str  # commit id of the append that holds ``last``
    tree: str  # tree id of the working tree when the run was sealed


@dataclass(frozen=True, slots=True)
class Approval:
    """A person's approval of the open irreversible intent ``intent``
    (`git wal approve`): the one record that may follow an open intent, which
    stays open until the approved step has run (approvals.py)."""

    run: RunId
    lsn: Lsn
    intent: Lsn
    approved_by: str  # "Name <email>" (git's identity), else the login name
    note: str = ""
    # As in Intent: an approval acts only with authority (trust/authority.py).
    auth: str | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """Reserves paths for this run (docs/agents-together.md): another run's step
    on a path one of ``paths`` matches is refused (or only warned about) until
    ``at + ttl``. A later claim of the same pattern by this run replaces it;
    ``ttl`` 0 releases it. A claim dies with its run's seal or drop too."""

    run: RunId
    lsn: Lsn
    paths: tuple[str, ...]  # tree-relative paths or glob patterns (fnmatch: * ? [...])
    at: int  # Unix seconds when the claim was made
    ttl: int  # seconds it lasts from ``at``; 0: a release
    auth: str | None = None  # as in Intent: a claim binds only with authority


@dataclass(frozen=True, slots=True)
class Takeover:
    """The run goes on in the clone that wrote it (`git wal resume`), pushed by
    compare-and-swap after all the remote held: data, it authorizes nothing."""

    run: RunId
    lsn: Lsn
    clone: str  # the taker's public id (16 hex digits, log/authorship.py)
    host: str  # its host name, for people: never compared
    worktree: tuple[str, str]  # (name, path) of the worktree the run goes on in
    remote: str  # the remote's name there
    taken: str  # the remote's head it continued from (a commit id)
    at: int  # Unix seconds, the taker's clock


# The types carrying ``auth`` (on every one gitwal appends): those that
# authorize or close something (trust/authority.py's table).
Maced = Intent | Commit | Abort | Approval | Claim
MACED: tuple[type[Maced], ...] = (Intent, Commit, Abort, Approval, Claim)

Record = Plan | Intent | Commit | Abort | Checkpoint | Unlogged | Seal | Approval | Claim | Takeover
TYPES: dict[str, type[Record]] = {
    "plan": Plan,
    "intent": Intent,
    "commit": Commit,
    "abort": Abort,
    "checkpoint": Checkpoint,
    "unlogged": Unlogged,
    "seal": Seal,
    "approval": Approval,
    "claim": Claim,
    "takeover": Takeover,
}
_NAMES = {cls: name for name, cls in TYPES.items()}


def type_name(record: Record) -> str:
    return _NAMES[type(record)]


def summary(record: Record) -> str:
    """The one-line message of the append commit that carries ``record``."""
    if isinstance(record, Plan):
        return f"wal {record.lsn} plan: {record.task[:60]}"
    if isinstance(record, Intent):
        return f"wal {record.lsn} intent {record.tool} {' '.join(record.target)[:60]}"
    if isinstance(record, Commit):
        return f"wal {record.lsn} commit {record.intent}"
    if isinstance(record, Checkpoint):
        return f"wal {record.lsn} checkpoint {record.git[:12]} covers {record.covers}"
    if isinstance(record, Unlogged):
        return f"wal {record.lsn} unlogged {' '.join(record.paths)[:60]}"
    if isinstance(record, Seal):
        return f"wal {record.lsn} seal {record.last}"
    if isinstance(record, Approval):
        return f"wal {record.lsn} approval {record.intent}"
    if isinstance(record, Claim):
        what = "release" if record.ttl == 0 else "claim"
        return f"wal {record.lsn} {what} {' '.join(record.paths)[:60]}"
    if isinstance(record, Takeover):
        return f"wal {record.lsn} takeover by {record.host[:40]} ({record.clone})"
    return f"wal {record.lsn} abort {record.intent}: {record.reason[:60]}"


# -- agent steps: the marks an agent's hook call leaves in its records --------

AGENT_ARG = "agent"  # the args key of an agent intent: {"name", "tool", "call", ...}
MISS = "prediction miss"  # how a commit's `verified` text starts when post != predicted
UNPREDICTED = "post not predicted"  # ... when the intent's post was `unknown`


def agent_tag(intent: Intent) -> dict[str, Any] | None:
    return tag if isinstance(tag := intent.args.get(AGENT_ARG), dict) else None


def agent_tool(args: dict[str, Any]) -> str | None:
    """The agent's own tool name (``Edit``, ``Bash``, ...) of an agent's intent."""
    tool = tag.get("tool") if isinstance(tag := args.get(AGENT_ARG), dict) else None
    return tool if isinstance(tool, str) and tool else None


def is_miss(intent: Intent, commit: Commit) -> bool:
    """A commit that recorded a post other than the predicted one (agent steps
    only); a target whose post was ``unknown`` is no miss."""
    if intent.post is None:
        return False
    if len(commit.post) != len(intent.post):
        return True
    return any(want not in (UNKNOWN, have)
               for want, have in zip(intent.post, commit.post, strict=True))


def unpredicted(intent: Intent) -> bool:
    """An agent's file step logged before its effect was known (docs/format.md)."""
    return intent.post is not None and UNKNOWN in intent.post


# What an agent exports to the commands its shell tool runs (a process that sees
# it runs inside one of its tool calls). Codex (0.169.0) exports the call's id
# (its hooks' tool_use_id) and its thread and session ids, its hooks get none.
AGENT_ENV = (("CLAUDECODE", "claude-code"), ("GEMINI_CLI", "gemini-cli"),
             ("CODEX_TOOL_CALL_ID", "codex"), ("CODEX_THREAD_ID", "codex"),
             ("CODEX_SESSION_ID", "codex"))


def calling_agent(env: Mapping[str, str]) -> str | None:
    """The agent (as ``args.agent.name`` names it) whose tool call runs this process."""
    for var, name in AGENT_ENV:
        if env.get(var, "") not in ("", "0"):
            return name
    return None
