"""Which other runs of this worktree are live: what a shell step's intent notes
(``args.others``) and which open steps of other runs a failing shell step's
rollback must leave alone (shell_among.py says why; docs/agents-together.md).

A run binds this worktree only while it may still be changing it: a run of
this clone (its records carry this clone's authority, trust/authority.py:
a fetched run binds nobody here), not sealed, and for an open shell step,
only while its command runs. An abandoned session switches nothing off.
"""

from __future__ import annotations

from collections.abc import Iterable

import pygit2

from ..base.errors import WalError
from ..base.ids import CommitId, TreeId
from ..log.chain import Chain
from ..log.command_locks import command_running
from ..records.model import EXEC_TOOL, MACED, Approval, Intent, Record, Seal, agent_tag
from ..trust.authority import may_act
from ..worktree.tree import Worktree
from .claims import now_s
from .open_intents import runs_here

__all__ = ["AGENT_CALL_LIMIT", "LIVE_WINDOW", "left_to_others", "others_now"]

LIVE_WINDOW = 3600  # seconds: a run that appended this recently may still append now
AGENT_CALL_LIMIT = 3600  # seconds an agent's shell call counts as running (no lock tells)


def _head_time(chain: Chain, head: CommitId) -> int:
    return next(iter(chain.appends(head)))[0].commit_time


def others_now(repo: pygit2.Repository, me: str, now: int | None = None) -> dict[str, int]:
    """Every other live run of this clone and worktree: its newest LSN (read
    before the pre snapshot, module docstring). Live: not sealed, and it
    appended in the last LIVE_WINDOW seconds or has an open intent; a run left
    out that commits while the step runs is found by time at the closing."""
    t = now_s() if now is None else now
    out: dict[str, int] = {}
    for rid, chain, head in runs_here(repo, me):
        try:
            last = chain.head_records(head)[-1]
            if isinstance(last, Seal) or not _of_this_clone(repo, last):
                continue  # sealed: nothing more to come; fetched: not a run of this tree
            if isinstance(last, Intent | Approval) or _head_time(chain, head) >= t - LIVE_WINDOW:
                out[str(rid)] = int(last.lsn)
        except WalError:
            continue  # a damaged log is reported by its own commands
    return out


def _of_this_clone(repo: pygit2.Repository, last: Record) -> bool:
    """A run whose newest record is another clone's (fetched, or appended with
    plumbing) is data here: it binds nobody and explains nothing here."""
    return not isinstance(last, MACED) or may_act(repo, last)


def left_to_others(repo: pygit2.Repository, wt: Worktree, me: str, paths: Iterable[str],
                   now: str, at: int | None = None) -> dict[str, str]:
    """The paths among ``paths`` that a restore of ``me``'s shell step (the tree
    ``now`` back to its pre tree) must leave, each with why: another run's file
    step is changing it right now (its intent open: putting the path back would
    lose that step's update), or another run's shell step still running may
    have changed it (it differs between that step's pre tree and ``now``: its
    command's changes cannot be told from this step's until it commits).

    Only an open step with authority here counts (a fetched run's binds nobody
    here), and a shell step only while it runs: its command lock is held, or,
    for an agent's call (the agent runs it, no lock tells), for
    AGENT_CALL_LIMIT seconds after its intent. A crashed, never recovered step
    switches no rollback off."""
    wanted = list(paths)
    t = now_s() if at is None else at
    out: dict[str, str] = {}
    for rid, chain, head in runs_here(repo, me):
        try:
            last = chain.head_records(head)[-1]
            if not isinstance(last, Intent) or not may_act(repo, last):
                continue
            if last.tool == EXEC_TOOL and not _running(repo, chain, head, last, t):
                continue
        except WalError:
            continue
        if last.tool != EXEC_TOOL:
            for p in set(last.target) & set(wanted):
                out.setdefault(p, f"being changed by run {rid}, LSN {last.lsn}")
        elif last.pre and isinstance(repo.get(last.pre[0]), pygit2.Tree):
            moved = set(wt.changed_paths(TreeId(last.pre[0]), TreeId(now)))
            for p in moved & set(wanted):
                out.setdefault(p, f"maybe changed by run {rid}'s shell step, LSN "
                                  f"{last.lsn}, still open")
    return out


def _running(repo: pygit2.Repository, chain: Chain, head: CommitId, intent: Intent,
             now: int) -> bool:
    """Whether another run's open shell step may still be changing the tree."""
    if agent_tag(intent) is None:
        return command_running(repo, str(chain.run), intent.lsn) is not None
    return _head_time(chain, head) >= now - AGENT_CALL_LIMIT
