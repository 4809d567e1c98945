"""Irreversible steps behind a person's approval (docs/recovery.md, "Irreversible
steps").

``git wal exec --irreversible -- CMD`` (a push, a publish, a migration):

1. refused while the run has reversible steps after its newest checkpoint
   (split reversible from irreversible: checkpoint first), unless
   ``allow_uncheckpointed``;
2. the intent is logged (``args.irreversible``), and the step stops there:
   :class:`~gitwal.base.errors.NeedsApproval` (exit 3), nothing run;
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

from ..base.errors import NeedsApproval, RunBusy, WalError
from ..base.ids import CommitId, Lsn
from ..records.model import Approval, Checkpoint, Commit, Intent, Record, agent_tag
from ..run import Run, StepResult
from ..trust.authority import Waiting, require, waiting
from .resolve import a_person, describe

__all__ = ["approve", "exec_irreversible", "pending", "refuse_unsplit"]


def is_irreversible(intent: Intent) -> bool:
    return intent.tool == "exec" and intent.args.get("irreversible") is True


def pending(run: Run, head: CommitId | None) -> Waiting | None:
    """The open irreversible intent at the log's end and its approvals: only
    one with authority here (trust/authority.py) may run it; a fetched or
    hand-written approval is data."""
    found = waiting(run.store.repo, run.store, head)
    return found if found is not None and is_irreversible(found.intent) else None


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
        found = pending(run, head)
        if found is None or found.intent.lsn != lsn:
            raise WalError(f"run {run.id}: LSN {lsn} is not an irreversible step waiting "
                           "for approval", "`git wal status` shows the open step; "
                           "`git wal exec --irreversible` logs one")
        if found.approved is not None:
            raise WalError(f"LSN {lsn} was approved already (LSN {found.approved.lsn}, by "
                           f"{found.approved.approved_by})", "run the same command again, "
                           "or `git wal recover --redo`, to run it")
        require(run.store.repo, found.intent, "approve it (its command would never run here)")
        refuse_started(run, found.intent)
        last = run.store.head_records(head)[-1]
        record = Approval(run.id, Lsn(last.lsn + 1), Lsn(lsn), who, note)
        run.store.append([record], [], head)
    return record


def refuse_started(run: Run, intent: Intent) -> None:
    """A step whose command may have started is never approved into a second
    run: an agent's call (the agent ran it, no command lock can tell), or one
    whose command lock file exists. Only a person's decision closes it."""
    tag = agent_tag(intent)
    if tag is None and not run.store.command_started(intent.lsn):
        return
    why = (f"it is {tag.get('name', 'an agent')}'s call, which the agent runs itself: it "
           "may have run already" if tag is not None else
           "its command was started before (its command lock file exists)")
    raise WalError(
        f"LSN {intent.lsn} cannot be approved: {why}; approving it would run it again",
        f"find out whether it happened, then `git wal resolve {intent.lsn} --run {run.id} "
        "--applied` (it did) or `--not-applied` (it did not)")


def exec_irreversible(run: Run, argv: Sequence[str], check: str | None = None,
                      step: int | None = None, watch: Sequence[str] = (),
                      timeout: float | None = None, confirm: str | None = None,
                      allow_uncheckpointed: bool = False) -> StepResult:
    """Run ``argv`` as an irreversible step: logged and stopped until approved
    (NeedsApproval), or, when it is the approved step waiting, run once."""
    with run.store.locked():
        head = run.store.head()
        found = pending(run, head)
        if found is not None and head is not None:
            intent, approval = found.intent, found.approved
            if list(argv) != intent.args.get("argv"):
                raise WalError(f"LSN {intent.lsn} (exec {shlex.join(intent.args['argv'])}) "
                               "is an irreversible step still waiting", "approve and run it, "
                               "or close it (`git wal resolve "
                               f"{intent.lsn} --not-applied`) before another step")
            if approval is None:
                data = "".join(
                    f"; LSN {a.lsn} (approval by {a.approved_by}) was not written in this "
                    "clone nor signed by a key you trust: it is data here" for a in found.data)
                raise NeedsApproval(f"LSN {intent.lsn} is waiting for a person's approval"
                                    + data,
                                    f"ask the user to run `git wal approve {intent.lsn}`")
            if run.store.command_started(intent.lsn):
                raise WalError(f"LSN {intent.lsn} was started before (a crash?): it is not "
                               "run twice", "`git wal recover` decides it")
            newest = run.store.head_records(head)[-1].lsn
            return run.run_logged(intent, head, Lsn(newest), timeout)
        if not allow_uncheckpointed:
            refuse_unsplit(run.since_checkpoint())
    return run.exec(argv, check=check, step=step, watch=watch, timeout=timeout,
                    confirm=confirm, irreversible=True)
