"""The checks `git wal verify` runs over each loaded run, in order
(:data:`DEFAULT_CHECKS`), and what each sees (:class:`RunContext`).

A check is any :class:`Check`: a name and a call that yields failures and may
add notes on what it could not check, and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pygit2

from ..base.errors import WalError
from ..changes.history import log_problems
from ..log.segments import Entry, Failure, Segment
from ..records.model import Checkpoint, Intent, Plan, Record
from ..together.shell_among import check_named
from ..trust.signatures import signature_failures
from .branch import branch_failures, logged_states, resolve
from .checkpoints import checkpoint_failures
from .closing import closing_failures
from .objects import object_failures
from .replay import drift_notes, intent_failures, intents_of
from .seal import seal_failures
from .session import Session


@dataclass(frozen=True)
class Options:
    """What the caller asked for beyond the run selection."""

    branch: str | None = None  # --branch; None: each run's plan branch, if it exists
    allowed_signers: Path | None = None  # check every signature against this file
    require_signed: bool = False  # an unsigned append is a failure
    require_sealed: bool = False  # a run that does not end in a seal is a failure
    order: bool = False  # put the runs' steps in one order (verify --all): runs_order.py


@dataclass
class RunContext:
    """One loaded run, as every check sees it."""

    repo: pygit2.Repository
    run: str
    segments: list[Segment]
    history: list[Entry]
    plan: Plan | None
    options: Options
    session: Session
    branch: str | None = None  # the branch the branch check compared, if it ran
    notes: list[str] = field(default_factory=list)  # what was not checked, and why


class Check(Protocol):
    """One verification over a loaded run. ``name`` labels its failures."""

    @property
    def name(self) -> str: ...

    def __call__(self, ctx: RunContext) -> Iterable[Failure]: ...


@dataclass(frozen=True)
class FnCheck:
    name: str
    fn: Callable[[RunContext], Iterable[Failure]]

    def __call__(self, ctx: RunContext) -> Iterable[Failure]:
        return self.fn(ctx)


def _records_of(ctx: RunContext, run: str) -> list[Record] | None:
    """Another run's records, for the ``among`` check (None: unreadable)."""
    try:
        loaded = ctx.session.load(run)
    except WalError:
        return None
    return [e.record for e in loaded.history] if loaded.plan is not None else None


def _closing(ctx: RunContext) -> Iterable[Failure]:
    """The closing rules, plus notes on what the shape of the log leaves unchecked."""
    if ctx.history:
        first, last = ctx.history[0].record, ctx.history[-1].record
        if isinstance(first, Checkpoint):
            ctx.notes.append(f"the records before LSN {first.lsn} were dropped (`git wal "
                             f"compact --drop`): checkpoint LSN {first.lsn} stands for them")
        if isinstance(last, Intent):
            ctx.notes.append(f"intent LSN {last.lsn} is open (the run stopped mid-step): "
                             f"`git wal recover --run {ctx.run}` decides it")
    return closing_failures(ctx.run, ctx.history)


def _intent(ctx: RunContext) -> Iterable[Failure]:
    """Replay every intent; note steps that built on changes made outside the log."""
    ctx.notes += drift_notes(ctx.repo, ctx.history)
    return intent_failures(ctx.repo, ctx.run, ctx.history)


def _branch(ctx: RunContext) -> Iterable[Failure]:
    if ctx.plan is None:
        ctx.notes.append("no plan could be read: the branch was not checked")
        return []
    name = ctx.options.branch or ctx.plan.branch
    if name is None:
        ctx.notes.append("the run began on a detached HEAD: pass --branch to check a branch")
        return []
    found = resolve(ctx.repo, name)
    if found is None:  # only a plan's branch gets here: verify() checked --branch
        ctx.notes.append(f"branch {name} does not exist here: the branch was not checked")
        return []
    ref, tip = found
    ctx.branch = ref
    own = logged_states(ctx.repo, ctx.history, ctx.plan.base)
    return branch_failures(ctx.repo, ctx.run, ctx.plan, ref, tip, own,
                           lambda: ctx.session.others(ctx.run))


def _order(ctx: RunContext) -> Iterable[Failure]:
    if not ctx.options.order:
        return []
    return [f for f in ctx.session.order(ctx.options.branch) if f.run == ctx.run]


def _signature(ctx: RunContext) -> Iterable[Failure]:
    if ctx.session.allowed is None and not ctx.options.require_signed:
        return []
    return signature_failures(ctx.run, ctx.segments, ctx.session.allowed,
                              ctx.options.require_signed)


def _seal(ctx: RunContext) -> Iterable[Failure]:
    found = seal_failures(ctx.repo, ctx.run, ctx.segments, ctx.history, ctx.plan,
                          ctx.options.require_sealed, ctx.session.allowed is not None)
    ctx.notes += found.notes
    return found.failures


DEFAULT_CHECKS: tuple[Check, ...] = (
    FnCheck("closing", _closing),
    FnCheck("intent", _intent),
    FnCheck("objects", lambda c: object_failures(c.repo, c.run, c.segments,
                                                 intents_of(c.history))),
    FnCheck("checkpoint", lambda c: checkpoint_failures(c.repo, c.run, c.history, c.plan,
                                                        c.session.namespace)),
    FnCheck("undo", lambda c: [Failure(c.run, "undo", why, lsn) for lsn, why in
                               log_problems(c.repo, (e.record for e in c.history))]),
    FnCheck("among", lambda c: check_named(c.repo, c.run, (e.record for e in c.history),
                                           lambda r: _records_of(c, r), c.notes)),
    FnCheck("branch", _branch),
    FnCheck("order", _order),
    FnCheck("signature", _signature),
    FnCheck("seal", _seal),
)
