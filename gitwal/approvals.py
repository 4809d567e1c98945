"""Irreversible steps behind a person's approval (docs/recovery.md, "Irreversible
steps").

``git wal exec --irreversible -- CMD`` (a push, a publish, a migration):

1. refused while the run has reversible steps after its newest checkpoint
   (split reversible from irreversible: checkpoint first), unless
   ``allow_uncheckpointed``;
2. the intent is logged (``args.irreversible``), and the step stops there:
   :class:`~gitwal.errors.NeedsApproval` (exit 3), nothing run;
3. ``git wal approve LSN`` appends an ``approval`` record naming that intent,
   who approved and why (signed like every append when signing is on);
4. the same command again (or ``git wal recover --redo``) runs the approved
   intent, exactly once: its command lock file, created before the command
   starts, tells a crash afterwards apart from a command never started.

The approval is the one record that may follow an open intent (docs/format.md):
the intent stays open, and the newest, while it waits. A pending approval
survives a crash: recovery leaves an unapproved, never-started intent open and
the resume prompt names it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from .decisions import a_person, describe
from .errors import NeedsApproval, RunBusy, WalError
from .ids import Lsn
from .records.model import Approval, Checkpoint, Commit, Intent, Record
from .run import Run, StepResult

__all__ = ["approve", "exec_irreversible", "pending", "refuse_unsplit"]


def is_irreversible(intent: Intent) -> bool:
    return intent.tool == "exec" and intent.args.get("irreversible") is True


def pending(records: Sequence[Record]) -> tuple[Intent, Approval | None] | None:
    """The open irreversible intent at the log's end and its approval, if any."""
    if not records:
        return None
    last = records[-1]
    approval = last if isinstance(last, Approval) else None
    intent = records[-2] if approval is not None and len(records) > 1 else last
    if not isinstance(intent, Intent) or not is_irreversible(intent):
        return None
    return intent, approval


def refuse_unsplit(segment: Sequence[Record]) -> None:
    """Refuse an irreversible step while reversible steps since the newest
    checkpoint are not behind one (``segment``: the records since it)."""
    opened: dict[int, Intent] = {r.lsn: r for r in segment if isinstance(r, Intent)}
    done = [r.intent for r in segment if isinstance(r, Commit)
            and (i := opened.get(r.intent)) is not None and not is_irreversible(i)]
    if done:
        covered = next((r.covers for r in reversed(segment) if isinstance(r, Checkpoint)), 0)
        raise WalError(
            f"{len(done)} reversible step(s) since the newest checkpoint (LSN "
            f"{', '.join(map(str, done[:5]))}{' ...' if len(done) > 5 else ''}) are not "
            "behind a checkpoint" + (f" (it covers LSN {covered})" if covered else ""),
            "split reversible from irreversible: batch the irreversible actions at the end, "
            "behind a checkpoint (`git wal checkpoint`), or pass --allow-uncheckpointed")


def approve(run: Run, lsn: int, note: str = "", approved_by: str | None = None,
            yes: bool = False) -> Approval:
    """Append a person's approval of the waiting irreversible intent ``lsn``
    (``yes``: a person decided; otherwise asked on the terminal)."""
    person = a_person(run.store.repo, "approve", "approval", step=describe(run, lsn, waiting=True),
                      yes=yes)
    who = approved_by or person
    with run.store.locked(wait=False):
        head = run.store.head()
        if head is None:
            raise RunBusy(f"run {run.id} has no log")
        waiting = pending(run.recent(2))
        if waiting is None or waiting[0].lsn != lsn:
            raise WalError(f"run {run.id}: LSN {lsn} is not an irreversible step waiting "
                           "for approval", "`git wal status` shows the open step; "
                           "`git wal exec --irreversible` logs one")
        if waiting[1] is not None:
            raise WalError(f"LSN {lsn} was approved already (LSN {waiting[1].lsn}, by "
                           f"{waiting[1].approved_by})", "run the same command again, or "
                           "`git wal recover --redo`, to run it")
        last = run.store.head_records(head)[-1]
        record = Approval(run.id, Lsn(last.lsn + 1), Lsn(lsn), who, note)
        run.store.append([record], [], head)
    return record


def exec_irreversible(run: Run, argv: Sequence[str], check: str | None = None,
                      step: int | None = None, watch: Sequence[str] = (),
                      timeout: float | None = None, confirm: str | None = None,
                      allow_uncheckpointed: bool = False) -> StepResult:
    """Run ``argv`` as an irreversible step: logged and stopped until approved
    (NeedsApproval), or, when it is the approved step waiting, run once."""
    with run.store.locked():
        head = run.store.head()
        records = run.recent(2)
        waiting = pending(records)
        if waiting is not None and head is not None:
            intent, approval = waiting
            if list(argv) != intent.args.get("argv"):
                raise WalError(f"LSN {intent.lsn} (exec {shlex.join(intent.args['argv'])}) "
                               "is an irreversible step still waiting", "approve and run it, "
                               "or close it (`git wal resolve "
                               f"{intent.lsn} --not-applied`) before another step")
            if approval is None:
                raise NeedsApproval(f"LSN {intent.lsn} is waiting for a person's approval",
                                    f"ask the user to run `git wal approve {intent.lsn}`")
            if run.store.command_started(intent.lsn):
                raise WalError(f"LSN {intent.lsn} was started before (a crash?): it is not "
                               "run twice", "`git wal recover` decides it")
            return run.run_logged(intent, head, approval.lsn, timeout)
        if not allow_uncheckpointed:
            refuse_unsplit(run.since_checkpoint())
    return run.exec(argv, check=check, step=step, watch=watch, timeout=timeout,
                    confirm=confirm, irreversible=True)
