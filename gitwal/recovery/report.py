"""A recovery's report as data: what was found for each open intent, what
recovery did, committed steps and drift. The resume prompt (prompt.py)
renders it; ``--json`` prints :meth:`Report.to_dict` (docs/recovery.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.ids import Lsn
from ..records.model import Checkpoint, Intent, Plan
from .redo import redo_command

APPLIED = "applied-missing-commit"
NOT_APPLIED = "not-applied"
TORN = "torn"
IN_DOUBT = "in-doubt"
SUPERSEDED = "superseded"  # a target now holds another run's committed change
AWAITING_APPROVAL = "awaiting-approval"  # an irreversible step no person approved yet


@dataclass(frozen=True)
class Outcome:
    """What recovery found for one open intent and what it did about it."""

    lsn: Lsn
    tool: str
    args: dict[str, Any]
    target: tuple[str, ...]
    outcome: str  # APPLIED | NOT_APPLIED | TORN | IN_DOUBT
    action: str  # committed | redone | aborted | restored | left-open
    detail: str
    changed: tuple[str, ...] = ()  # exec: paths that differ from the pre tree
    open: bool = False  # still open after recovery (needs a decision)
    step: int | None = None  # the plan step the intent carries out
    # (path, object id, command that brings it back): bytes gitwal did not
    # write, saved in the log before a forced restore overwrote them
    saved: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Drift:
    """A committed path whose content changed after its commit."""

    path: str
    lsn: Lsn  # the intent that last committed it
    expected: str
    actual: str


@dataclass(frozen=True, slots=True)
class Done:
    """A committed step as a report lists it (small: a report of a long run
    holds one per committed step, not the intent records)."""

    lsn: Lsn  # the intent
    tool: str
    target: tuple[str, ...]
    step: int | None


@dataclass(frozen=True)
class ChangedElsewhere:
    """A path this run works on that another run's step changed (for the prompt)."""

    path: str
    run: str
    lsn: Lsn
    task: str

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "run": self.run, "lsn": self.lsn, "task": self.task}


@dataclass(frozen=True)
class Decided:
    """A step closed by a person's decision (`git wal resolve`), as reported."""

    lsn: Lsn  # the intent
    tool: str
    args: dict[str, Any]
    target: tuple[str, ...]
    applied: bool
    decided_by: str
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"lsn": self.lsn, "tool": self.tool, "target": list(self.target),
                "decision": "applied" if self.applied else "not-applied",
                "decided_by": self.decided_by, "note": self.note}


@dataclass(frozen=True)
class Report:
    run: str
    plan: Plan
    records: int
    committed: tuple[Done, ...]  # committed intents after the newest checkpoint
    aborted: tuple[Lsn, ...]
    outcomes: tuple[Outcome, ...]
    drift: tuple[Drift, ...]
    cleared_lock: bool
    removed_temp: tuple[str, ...] = field(default=())
    checkpoint: Checkpoint | None = None  # the newest checkpoint (the report starts there)
    # Steps an earlier recovery closed without doing them (not applied, or put
    # back by --restore) after the last committed step: still to be done.
    undone: tuple[Outcome, ...] = ()
    # Paths a crash left un-restored after an abort that had restored them
    # (recovery_exec.ExecDecisions._finish_restores), put back now.
    finished_restore: tuple[str, ...] = ()
    last_step: Intent | None = None  # the newest committed intent
    last_agent_step: Intent | None = None  # ... that an agent's tool call made
    decided: tuple[Decided, ...] = ()  # steps closed by a person since the checkpoint
    # Paths this run works on that other runs changed since its last committed step.
    elsewhere: tuple[ChangedElsewhere, ...] = ()

    @property
    def in_doubt(self) -> bool:
        return any(o.open for o in self.outcomes)

    @property
    def last_committed(self) -> Lsn | None:
        if self.committed:
            return self.committed[-1].lsn
        return Lsn(self.checkpoint.covers) if self.checkpoint and self.checkpoint.covers else None

    @property
    def committed_total(self) -> int:
        """Committed intents in the whole run, including those behind the checkpoint."""
        return (self.checkpoint.committed if self.checkpoint else 0) + len(self.committed)

    @property
    def next_lsn(self) -> Lsn:
        return Lsn(self.records + 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "task": self.plan.task,
            "base": self.plan.base,
            "branch": self.plan.branch,
            "steps": list(self.plan.steps),
            "remaining_steps": [
                {"step": n, "text": text} for n, text in self.remaining_steps()
            ],
            "records": self.records,
            "next_lsn": self.next_lsn,
            "committed_through": self.last_committed,
            "committed_total": self.committed_total,
            # The newest checkpoint's LSN, as in `status --json` (docs/json.md);
            # the commit it made, where it lives and what it covers below.
            "checkpoint": None if self.checkpoint is None else self.checkpoint.lsn,
            "checkpoint_commit": None if self.checkpoint is None else {
                "git": self.checkpoint.git, "ref": self.checkpoint.ref,
                "covers": self.checkpoint.covers,
            },
            # LSNs, as in `status --json` (docs/json.md); the steps themselves below.
            "committed": [i.lsn for i in self.committed],
            "committed_steps": [
                {"lsn": i.lsn, "tool": i.tool, "target": list(i.target), "step": i.step}
                for i in self.committed
            ],
            "aborted": list(self.aborted),
            "decided": [d.to_dict() for d in self.decided],
            "intents": [
                {
                    "lsn": o.lsn, "tool": o.tool, "args": o.args, "target": list(o.target),
                    "outcome": o.outcome, "action": o.action, "detail": o.detail,
                    "changed": list(o.changed), "open": o.open, "step": o.step,
                    "redo": redo_command(o.tool, o.args, o.step, self.run),
                    "saved": [{"path": p, "object": oid, "command": cmd}
                              for p, oid, cmd in o.saved],
                }
                for o in self.outcomes
            ],
            "drift": [
                {"path": d.path, "lsn": d.lsn, "expected": d.expected, "actual": d.actual}
                for d in self.drift
            ],
            "undone": [
                {"lsn": o.lsn, "tool": o.tool, "target": list(o.target), "step": o.step,
                 "reason": o.detail, "redo": redo_command(o.tool, o.args, o.step, self.run)}
                for o in self.undone
            ],
            "cleared_stale_lock": self.cleared_lock,
            "removed_temp_files": list(self.removed_temp),
            "finished_restore": list(self.finished_restore),
            "in_doubt": self.in_doubt,
            "changed_elsewhere": [c.to_dict() for c in self.elsewhere],
        }

    def remaining_steps(self) -> list[tuple[int, str]]:
        """Plan steps that no committed intent has carried out.

        Intents name their plan step (``step``); a run whose intents never do is
        read as "the n-th committed intent carries out plan step n".
        """
        steps = list(enumerate(self.plan.steps, start=1))
        cp = self.checkpoint
        done = set(cp.done_steps if cp else ()) | {i.step for i in self.committed} - {None}
        if done:
            return [(n, s) for n, s in steps if n not in done]
        return steps[self.committed_total :]


