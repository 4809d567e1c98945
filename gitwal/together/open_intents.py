"""Other runs' open file steps: what a step must not write over.

An agent's file step spans two hook processes (the intent, the agent's own
write, the commit), so no lock can be held across it; instead its open
intent is the mark. A step of another run on one of its targets is refused
while that intent stays open (docs/agents-together.md).

Cost: one ref read and one append commit per other live run (the newest
append alone holds an open intent: it is always the newest record); the
run's plan is read only when an open intent names one of the paths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pygit2

from ..base.errors import WalError
from ..base.ids import CommitId, RunId
from ..base.repository import worktree_name
from ..log.chain import Chain
from ..log.runs import list_runs
from ..records.model import EXEC_TOOL, Commit, Intent, agent_tag
from .pathlocks import BUSY_HINT, PathBusy, busy_message


@dataclass(frozen=True)
class OpenStep:
    """Another run's open file intent on one of the paths asked about."""

    run: str
    path: str
    intent: Intent
    task: str

    def refusal(self) -> PathBusy:
        tag = agent_tag(self.intent)
        tool = str(tag.get("tool", self.intent.tool)) if tag else self.intent.tool
        return PathBusy(
            busy_message(self.path, self.run, self.intent.lsn, tool, self.task),
            BUSY_HINT + f"; if run {self.run} is no longer running, "
            f"`git wal recover --run {self.run}` decides its open step")


def _heads(repo: pygit2.Repository, me: str) -> Iterator[tuple[RunId, Chain, CommitId]]:
    """(run, chain, head) of every other run with a live log (one dropped since
    it was listed, or whose ref cannot be read, is skipped)."""
    for rid in list_runs(repo):
        if rid == me:
            continue
        chain = Chain(repo, rid)
        try:
            head = chain.head()
        except WalError:
            continue
        if head is not None:
            yield rid, chain, head


def _here(chain: Chain, head: CommitId, here: str) -> bool:
    bound = chain.root_plan(head).worktree
    return bound is None or bound[0] == here


def runs_here(repo: pygit2.Repository, me: str) -> Iterator[tuple[RunId, Chain, CommitId]]:
    """(run, chain, head) of every other run whose steps meet this worktree's:
    bound to it, or to none (older logs). A run whose log cannot be read is
    skipped: its own commands report it."""
    here = worktree_name(repo)
    for rid, chain, head in _heads(repo, me):
        try:
            if _here(chain, head, here):
                yield rid, chain, head
        except WalError:
            continue


def closed_steps(chain: Chain, head: CommitId,
                 old: Callable[[int, int], bool] = lambda _lsn, _at: False,
                 limit: int | None = None) -> Iterator[tuple[Intent, Commit, int]]:
    """(intent, commit, time of the commit's append) of ``chain``'s committed
    steps, reading appends newest first; a step comes out once its intent is
    read (so not strictly newest first). A commit ``old(its LSN, its time)``
    calls old is not wanted; the walk stops at the first append whose first
    record is old once every wanted commit has its intent, or after ``limit``
    appends. Callers stop early by leaving the loop."""
    pending: list[tuple[Commit, int]] = []
    intents: dict[int, Intent] = {}
    for n, (append, records) in enumerate(chain.appends(head), 1):
        at = append.commit_time
        for rec in records:
            if isinstance(rec, Commit) and not old(rec.lsn, at):
                pending.append((rec, at))
            elif isinstance(rec, Intent):
                intents[rec.lsn] = rec
        ready = [(c, t) for c, t in pending if c.intent in intents]
        pending = [(c, t) for c, t in pending if c.intent not in intents]
        for c, t in ready:
            yield intents[c.intent], c, t
        if (old(records[0].lsn, at) and not pending) or (limit is not None and n >= limit):
            return


def open_step_on(repo: pygit2.Repository, me: RunId, paths: Sequence[str],
                 admit: Callable[[Intent], bool] = lambda _i: True) -> OpenStep | None:
    """The first other run (bound to this worktree, or unbound) whose newest
    record is an open file intent on one of ``paths`` that ``admit`` accepts
    (claims.py admits only intents with authority here: a fetched run's open
    intent binds nobody here); None if there is none.

    An open ``exec`` intent is not one: its paths are not known in advance.
    Cost: the newest append of each run; a plan is read only on a hit."""
    wanted = set(paths)
    here = worktree_name(repo)
    for rid, chain, head in _heads(repo, me):
        try:
            last = chain.head_records(head)[-1]
            if not isinstance(last, Intent) or last.tool == EXEC_TOOL:
                continue
            hit = [p for p in last.target if p in wanted]
            if not hit or not _here(chain, head, here) or not admit(last):
                continue  # another worktree's tree, or another clone's: not ours
            task = chain.root_plan(head).task
        except WalError:
            continue  # a damaged log is reported by its own commands, not here
        return OpenStep(rid, hit[0], last, task)
    return None


__all__ = ["OpenStep", "closed_steps", "open_step_on", "runs_here"]
