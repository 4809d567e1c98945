"""What other runs on this working tree did while a run was stopped: their
committed steps since a time (docs/agents-together.md, "Recovery among others").

Recovery uses it twice: an open file intent whose post-image another run's
later step began from did land (that run read it), so it is committed, never
rolled back or redone over that run's work; and the resume prompt names the
paths this run works on that other runs changed since its last committed
step, so the model reads them again.

Runs bound to another worktree do not count (their paths are another tree's).
"Since" is the append commits' time (this machine's clock, whole seconds):
a step appended in the same second counts as after, so a change is listed
once too often rather than missed. Each other run's log is read newest first
only back to that time (and to the intents its commits there close).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pygit2

from ..base.errors import WalError
from ..base.ids import CommitId, Lsn, RunId
from ..changes.history import Change, changes_of
from ..log.chain import Chain
from ..records.model import EXEC_TOOL, Commit, Intent
from ..together.claims import matches
from ..together.open_intents import closed_steps, runs_here
from ..together.shell_among import OTHERS_ARG
from ..trust.authority import may_act
from .report import ChangedElsewhere


@dataclass(frozen=True)
class Elsewhere:
    """One committed step of another run."""

    run: str
    task: str
    lsn: Lsn
    at: int  # Unix seconds of the append that committed it
    changes: tuple[Change, ...]
    tool: str = ""
    # A shell step's ``args.others``: every other run's newest LSN at its intent.
    noted: dict[str, int] | None = None


def last_commit_time(chain: Chain, head: CommitId) -> int:
    """The time of the newest append, from ``head`` back, that committed a step
    (the root's time if none did): every open intent is newer."""
    at = 0
    for commit, records in chain.appends(head):
        at = commit.commit_time
        if any(isinstance(r, Commit) for r in records):
            break
    return at


def steps_since(repo: pygit2.Repository, me: RunId, since: int) -> list[Elsewhere]:
    """The committed steps of the other runs of this worktree whose commit was
    appended at ``since`` or later, oldest first."""
    out: list[Elsewhere] = []
    for _rid, chain, head in runs_here(repo, me):
        try:
            out += _recent(repo, chain, head, chain.root_plan(head).task, since)
        except WalError:
            continue  # a damaged log is reported by its own commands; it explains nothing
    return sorted(out, key=lambda s: (s.at, s.run, s.lsn))


def _recent(repo: pygit2.Repository, chain: Chain, head: CommitId, task: str,
            since: int) -> list[Elsewhere]:
    out = []
    for step, c, at in closed_steps(chain, head, lambda _lsn, at: at < since):
        if not (may_act(repo, step) and may_act(repo, c)):
            continue  # a fetched or hand-written step decides nothing of this run's recovery
        noted = step.args.get(OTHERS_ARG) if step.tool == EXEC_TOOL else None
        out.append(Elsewhere(str(chain.run), task, step.lsn, at, changes_of(repo, step, c),
                             step.tool, noted if isinstance(noted, dict) else None))
    return out


def appended_at(chain: Chain, head: CommitId, lsns: Iterable[int]) -> dict[int, int]:
    """The time of the append that carries each of ``lsns`` (records near the head:
    a run's open intents), reading back only as far as the oldest of them."""
    wanted = set(lsns)
    out: dict[int, int] = {}
    for commit, records in chain.appends(head):
        for r in records:
            if r.lsn in wanted:
                out[r.lsn] = commit.commit_time
        if wanted <= out.keys():
            break
    return out


def landed_for(intent: Intent, at: int, others: Sequence[Elsewhere]) -> dict[str, Elsewhere]:
    """Targets of ``intent`` (of this run, appended at ``at``) whose post-image a
    step of another run that began after the intent began from.

    "Began after": only a shell step can (a file step of another run on a
    path an open intent names is refused), and its intent notes every other
    run's newest LSN (``args.others``): this run's at least the intent's. A
    shell step logged before those notes existed counts only when it was
    committed in a later second than the intent was appended. States alone
    cannot tell "it ended in this step's post before the intent" from "it
    read this step's write", so nothing else counts."""
    if intent.post is None:
        return {}
    wanted = {(p, post) for p, pre, post in zip(intent.target, intent.pre, intent.post,
                                                 strict=True) if post != pre}
    out: dict[str, Elsewhere] = {}
    for s in others:
        if s.tool != EXEC_TOOL:
            continue
        after = (s.noted.get(str(intent.run), 0) >= intent.lsn if s.noted is not None
                 else s.at > at)
        for c in s.changes:
            if after and (c.path, c.before) in wanted:
                out.setdefault(c.path, s)
    return out


def changed_on(paths: Iterable[str], patterns: Iterable[str],
               others: Sequence[Elsewhere]) -> tuple[ChangedElsewhere, ...]:
    """The newest change by another run of each of ``paths`` (or of a path one
    of ``patterns`` matches), by path."""
    exact, globs = set(paths), tuple(patterns)
    newest: dict[str, ChangedElsewhere] = {}
    for s in others:
        for c in s.changes:
            if c.path in exact or any(matches(g, c.path) for g in globs):
                newest[c.path] = ChangedElsewhere(c.path, s.run, s.lsn, s.task)
    return tuple(newest[p] for p in sorted(newest))
