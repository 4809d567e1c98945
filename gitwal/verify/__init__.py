"""`git wal verify`: do the run logs prove what happened? (docs/verify.md)

The verifier reads git objects only -- no working tree, no lock -- so CI can
run it in a fresh clone or a bare mirror. A run is loaded once (every
segment, read past its defects, see log/segments.py); then each :class:`Check`
in turn yields failures over the loaded run:

* ``closing``: commit/abort records close earlier intents, once each;
* ``intent``: file tools replay from their pre-images to their post ids;
* ``objects``: every named object is present and kept alive by the chain;
* ``checkpoint``: checkpoint fields and trees follow from the log;
* ``among``: what a shell step's closing names as other runs' steps
  (``theirs``) or claims (``claimed``) is in those runs' logs (shell_among.py);
* ``branch``: the branch's diff from the base is explained by the log;
* ``signature``: append signatures verify and come from trusted keys
  (signing/appends.py; with an allowed-signers file or ``require_signed``);
* ``seal``: seals are last, link to the append they follow and name the tree
  the log explains; with ``require_sealed`` every run ends in one
  (verify/seal.py).

Extension point: a check is any :class:`Check` object; it finds the append
commits, and so their signatures, in ``RunContext.segments``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pygit2

from ..base.errors import CorruptLog, WalError
from ..base.ids import RunId
from ..changes.history import log_problems
from ..log.rewrite import ARCHIVE_PREFIX
from ..log.runs import all_runs
from ..log.segments import Entry, Failure, Segment, merge_segments, read_segment
from ..log.store import Store
from ..records.codec import decode
from ..records.model import Checkpoint, Intent, Plan, Record
from ..signing.allowed_signers import AllowedSigner, load_allowed
from ..signing.appends import signature_failures
from ..together.shell_among import check_named
from .branch import branch_failures, logged_states, resolve
from .checkpoints import checkpoint_failures
from .replay import (
    closing_failures,
    drift_notes,
    intent_failures,
    intents_of,
    object_failures,
)
from .runs_order import Lane, order_failures
from .seal import seal_failures

__all__ = ["DEFAULT_CHECKS", "Check", "Failure", "Options", "Report", "RunContext",
           "RunResult", "verify"]

Progress = Callable[[int, int, str, str], None]  # (n, of, run, what is being done)


@dataclass(frozen=True)
class Options:
    """What the caller asked for beyond the run selection."""

    branch: str | None = None  # --branch; None: each run's plan branch, if it exists
    allowed_signers: Path | None = None  # check every signature against this file
    require_signed: bool = False  # an unsigned append is a failure
    require_sealed: bool = False  # a run that does not end in a seal is a failure
    order: bool = False  # put the runs' steps in one order (verify --all): runs_order.py


@dataclass(frozen=True)
class Loaded:
    segments: tuple[Segment, ...]  # archived segments by n, then the live chain
    history: tuple[Entry, ...]  # every record once, in LSN order
    plan: Plan | None
    failures: tuple[Failure, ...]  # what reading and joining the chains found


class Session:
    """State shared by the runs of one verification: each log is read once."""

    def __init__(self, repo: pygit2.Repository,
                 allowed: Sequence[AllowedSigner] | None = None) -> None:
        self.repo = repo
        self.allowed = allowed  # the allowed-signers entries, read once
        self._loaded: dict[str, Loaded] = {}
        self.runs: Sequence[str] = ()  # the runs being verified
        self._order: list[Failure] | None = None

    def load(self, run: str) -> Loaded:
        if run not in self._loaded:
            try:
                self._loaded[run] = _load(self.repo, run)
            except (LookupError, ValueError, pygit2.GitError) as e:
                # Damage the reader did not foresee (undecodable commit headers,
                # say): this run fails, the others are still verified.
                failure = Failure(run, "chain", f"could not read the log: {e!r}")
                self._loaded[run] = Loaded((), (), None, (failure,))
        return self._loaded[run]

    def order(self, branch: str | None) -> list[Failure]:
        """The order check's failures for every run of the session, found once."""
        if self._order is None:
            if branch is None and not self.repo.head_is_unborn:
                branch = "HEAD" if self.repo.head_is_detached else self.repo.head.name
            found = resolve(self.repo, branch) if branch else None
            lanes = [Lane(r, loaded.plan, loaded.history)
                     for r in self.runs for loaded in (self.load(r),)]
            self._order = order_failures(self.repo, lanes, found[1] if found else None,
                                         found[0] if found else "")
        return self._order

    def others(self, run: str) -> Iterator[tuple[Plan, list[Entry]]]:
        """(plan, history) of every other run whose plan could be read."""
        for other in all_runs(self.repo):
            loaded = self.load(other)
            if other != run and loaded.plan is not None:
                yield loaded.plan, list(loaded.history)


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
    FnCheck("checkpoint", lambda c: checkpoint_failures(c.repo, c.run, c.history, c.plan)),
    FnCheck("undo", lambda c: [Failure(c.run, "undo", why, lsn) for lsn, why in
                               log_problems(c.repo, (e.record for e in c.history))]),
    FnCheck("among", lambda c: check_named(c.repo, c.run, (e.record for e in c.history),
                                           lambda r: _records_of(c, r), c.notes)),
    FnCheck("branch", _branch),
    FnCheck("order", _order),
    FnCheck("signature", _signature),
    FnCheck("seal", _seal),
)


@dataclass(frozen=True)
class RunResult:
    run: str
    records: int
    failures: tuple[Failure, ...]
    branch: str | None = None
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "ok": self.ok, "records": self.records,
                "failures": [f.to_dict() for f in self.failures],
                "branch": self.branch, "notes": list(self.notes)}


@dataclass(frozen=True)
class Report:
    runs: tuple[RunResult, ...]
    allowed_signers: str | None = None  # the file signatures were checked against

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [r.to_dict() for r in self.runs], "ok": self.ok,
                "allowed_signers": self.allowed_signers}



def _load(repo: pygit2.Repository, run: str) -> Loaded:
    store = Store(repo, RunId(run))
    archives = store.archives()
    heads = [(f"{ARCHIVE_PREFIX}{run}/{n}", head, False) for n, head in archives]
    live = store.head()
    if live is not None:
        heads.append((store.ref_name, live, True))
    segments: list[Segment] = []
    # Archives are numbered 1, 2, ... as compactions make them, and written once:
    # a number missing below the highest is compacted history someone deleted.
    failures = [Failure(run, "chain", f"the archive {ARCHIVE_PREFIX}{run}/{n} is missing "
                        "(deleted? its records are gone after `git gc`; a copy may be on a "
                        "remote: `git wal fetch`)")
                for n in sorted(set(range(1, max((n for n, _ in archives), default=0)))
                                - {n for n, _ in archives})]
    for ref, head, is_live in heads:
        seg, found = read_segment(repo, run, ref, head, is_live)
        segments.append(seg)
        failures += found
    history, found = merge_segments(run, segments)
    failures += found
    plan, found = _plan(repo, run, history)
    return Loaded(tuple(segments), tuple(history), plan, tuple(failures + found))


def _plan(repo: pygit2.Repository, run: str,
          history: list[Entry]) -> tuple[Plan | None, list[Failure]]:
    """LSN 1, or (log compacted with --drop) the plan blob its first checkpoint names."""
    first = history[0].record if history else None
    if isinstance(first, Plan):
        return first, []
    if not isinstance(first, Checkpoint):
        return None, []  # the chain check already said how the log starts
    blob = repo.get(first.plan)
    why = "is missing"
    if isinstance(blob, pygit2.Blob):
        try:
            plan = decode(blob.data, f"plan blob {first.plan[:12]}")
        except CorruptLog as e:
            why = f"does not decode ({e.message})"
        else:
            if isinstance(plan, Plan) and plan.run == run and plan.lsn == 1:
                return plan, []
            why = "is not this run's plan"
    return None, [Failure(run, "chain", f"the plan blob {first.plan[:12]} named by "
                          f"checkpoint LSN {first.lsn} {why}", first.lsn)]


def verify(repo: pygit2.Repository, runs: Sequence[str], options: Options = Options(),
           checks: Sequence[Check] = DEFAULT_CHECKS,
           progress: Progress | None = None) -> Report:
    """Verify ``runs``; failures are data, a WalError means the request itself is wrong."""
    if options.branch is not None and resolve(repo, options.branch) is None:
        raise WalError(f"no branch, ref or commit named {options.branch!r}",
                       "pass --branch an existing branch (e.g. main) or ref")
    if options.allowed_signers is None and (options.require_signed or options.require_sealed):
        flag = "--require-signed" if options.require_signed else "--require-sealed"
        raise WalError(f"{flag} needs an allowed-signers file: a signature by any key "
                       "proves nothing", "pass --allowed-signers FILE (git's "
                       "gpg.ssh.allowedSignersFile format; `git wal trust add` writes one)")
    allowed = None if options.allowed_signers is None else load_allowed(options.allowed_signers)
    session = Session(repo, allowed)
    session.runs = runs
    results = []
    for n, run in enumerate(runs, 1):
        start = time.monotonic()
        if progress:
            progress(n, len(runs), run, "reading the log")
        loaded = session.load(run)
        ctx = RunContext(repo, run, list(loaded.segments), list(loaded.history), loaded.plan,
                         options, session)
        failures = list(loaded.failures)
        for check in checks:
            if progress:
                progress(n, len(runs), run, f"{check.name} check")
            try:
                failures += check(ctx)
            except (LookupError, ValueError, pygit2.GitError) as e:
                # A repository broken in a way no check foresaw (an object
                # missing under a tree that exists, say) is a failure of this
                # run, not a traceback that hides the other runs' results.
                failures.append(Failure(run, check.name, f"could not finish: {e!r}"))
        results.append(RunResult(run, len(loaded.history), tuple(dict.fromkeys(failures)),
                                 ctx.branch, tuple(ctx.notes), time.monotonic() - start))
    return Report(tuple(results), None if options.allowed_signers is None
                  else str(options.allowed_signers))
