"""Recovery: decide, for every open intent, whether it landed, and repair.

Decision table for file tools (docs/recovery.md is the normative copy; the
decisions themselves: recovery_files.py; shell steps: recovery_exec.py). Each
target holds the step's own bytes (pre, post, a torn prefix of post), another
run's committed change, or someone else's:

====================================  ===============  ===========================
targets                               outcome          what recovery does
====================================  ===============  ===========================
all post                              applied-missing  re-run the check; commit
                                      -commit
post, or read by another run's step   applied-missing  commit as found (elsewhere.py)
                                      -commit
all pre                               not-applied      redo if --redo; else abort
only pre, post, torn post             torn             restore ours; as not-applied
another run's, none foreign           superseded       restore ours; abort; no redo
any foreign                           in-doubt         nothing written (exit 3);
                                                       --restore saves, then restores
====================================  ===============  ===========================

The images of an intent this clone did not write (authorship.py) are never
written: such an intent is decided by hash alone.

Recovery touches only paths the log names (and gitwal's own temp files next to
them), and only in the ways the report states.
"""

from __future__ import annotations

from ..base.errors import RunBusy, WalError
from ..base.ids import CommitId, Lsn
from ..changes.ledger import Rules, changes
from ..log.authorship import foreign_command
from ..log.chain import Chain
from ..log.runs import list_runs
from ..log.store import Ref, Store
from ..records.codec import to_dict
from ..records.model import EXEC_TOOL, Abort, Approval, Intent, Plan, Record, agent_tag
from ..together.claims import now_s, run_claims
from ..trust.authority import may_act, waiting
from ..worktree.tree import Worktree
from .elsewhere import Elsewhere, appended_at, changed_on, last_commit_time, steps_since
from .files import FileDecisions
from .report import (
    APPLIED,
    IN_DOUBT,
    NOT_APPLIED,
    ChangedElsewhere,
    Drift,
    Outcome,
    Report,
)
from .scan import Scan
from .shell import ExecDecisions


class Recovery(ExecDecisions, FileDecisions):
    """Recovers one run; construct, then call :meth:`run` under the run lock."""

    def __init__(self, store: Store, wt: Worktree, redo: bool, restore: bool,
                 inside: str | None = None) -> None:
        self.store = store
        self.wt = wt
        self.redo = redo
        self.restore = restore
        # The agent whose tool call runs this recovery (agent_call.calling_agent).
        self.inside = inside
        self.head: CommitId | None = None
        self.next_lsn = Lsn(1)
        self.appended: list[Record] = []  # what this recovery added to the log
        self.approved: dict[Lsn, Approval] = {}
        self.unapproved: tuple[Approval, ...] = ()
        self._others: dict[tuple[str, str], str] | None = None
        self._since: int | None = None  # when this run last committed a step
        self._elsewhere: list[Elsewhere] | None = None
        self.intent_at: dict[int, int] = {}  # open intent LSN -> its append's time

    def _append(self, record: Record, refs: list[Ref] | None = None) -> None:
        self.head = self.store.append([record], refs or [], self.head)
        self.next_lsn = Lsn(self.next_lsn + 1)
        self.appended.append(record)

    def run(self, dry_run: bool = False) -> Report:
        cleared = False if dry_run else self.store.clear_stale_ref_lock()
        # One pass over the segment (scan.py): the records are not held.
        self.head = self.store.head()
        records = self.store.forward(self.head)
        if self.head is not None:
            self._since = last_commit_time(self.store, self.head)
        scan = Scan(self.wt, next(records)).feed(records)
        self.next_lsn = Lsn(scan.last.lsn + 1)
        plan = self.store.plan(scan.first)
        open_intents = scan.open_intents()
        if self.head is not None:
            self.intent_at = appended_at(self.store, self.head, [i.lsn for i in open_intents])
        # Only an approval with authority here runs a step (trust/authority.py);
        # a fetched or hand-written one is data, named in the outcome.
        found = waiting(self.store.repo, self.store, self.head)
        self.approved = ({found.intent.lsn: found.approved}
                         if found is not None and found.approved is not None else {})
        self.unapproved = found.data if found is not None else ()
        running = {i.lsn: path for i in open_intents if i.tool == "exec"
                   and (path := self.store.command_running(i.lsn)) is not None}
        if running and not dry_run:
            # Its effect is still unfolding: any decision now could be undone by it.
            lsn, path = next(iter(running.items()))
            raise RunBusy(
                f"run {self.store.run} is in use by another live gitwal process: the "
                f"command of exec step LSN {lsn} is still running",
                f"wait for it to exit (`fuser {path}` names it), or stop it, then "
                "run `git wal recover` again",
            )
        if not dry_run:
            self._refuse_own_call(open_intents)
        outcomes: list[Outcome] = []
        removed: list[str] = []
        finished: tuple[str, ...] = ()
        if not dry_run:
            finished, cleared_temps = self._finish_restores(scan.trailing_restores())
            removed.extend(cleared_temps)
        for intent in open_intents:
            # -- log trust (docs/security.md): a step whose command this clone
            # did not write is not decided: deciding may run the command.
            foreign = foreign_command(self.store.repo, intent)
            if foreign is not None and not dry_run:
                outcomes.append(self._foreign(intent, foreign))
                continue
            # -- end log trust
            if not dry_run:
                removed.extend(self._clear_temps(intent))
            if dry_run or may_act(self.store.repo, intent):
                outcome = self._decide(intent, dry_run)
            else:
                outcome = self._decide_unwritten(intent)
            outcomes.append(outcome)
            if intent.tool == "exec" and not dry_run and not outcome.open:
                self.store.clear_command_lock(intent.lsn)
        # Under the run lock nobody else appends: the log is what was read
        # plus what this recovery added (no second walk of the chain).
        scan.feed(self.appended)
        return Report(
            run=self.store.run, plan=plan, records=scan.last.lsn,
            committed=tuple(scan.committed), aborted=tuple(scan.aborted),
            outcomes=tuple(outcomes), drift=scan.drift(), cleared_lock=cleared,
            removed_temp=tuple(removed), checkpoint=scan.checkpoint,
            finished_restore=finished, undone=scan.undone({o.lsn for o in outcomes}),
            last_step=scan.last_step, last_agent_step=scan.last_agent_step,
            decided=tuple(scan.decided),
            elsewhere=self._changed_on_ours(scan, plan, open_intents),
        )

    def _changed_on_ours(self, scan: Scan, plan: Plan,
                         open_intents: list[Intent]) -> tuple[ChangedElsewhere, ...]:
        """Paths this run works on (its steps' targets, its open intents', paths its
        plan's steps name, its claims) that other runs changed since its last
        committed step: the model reads them again before it goes on."""
        ours = {p for d in scan.committed if d.tool != EXEC_TOOL for p in d.target}
        ours |= {p for i in open_intents if i.tool != EXEC_TOOL for p in i.target}
        ours |= {w for s in plan.steps for w in s.split()}
        patterns = [c.pattern for c in run_claims(self.store.repo, self.store.run, now_s())]
        return changed_on(ours, patterns, self._steps_elsewhere())

    def _steps_elsewhere(self) -> list[Elsewhere]:
        """Other runs' steps committed since this run's last (read once)."""
        if self._elsewhere is None:
            self._elsewhere = ([] if self._since is None else
                               steps_since(self.store.repo, self.store.run, self._since))
        return self._elsewhere

    def _clear_temps(self, intent: Intent) -> list[str]:
        if intent.tool == "exec":
            return []
        out = []
        for path in intent.target:
            for tag in (f"w{intent.lsn}", f"r{intent.lsn}"):
                if self.wt.clear_temp(path, tag):
                    out.append(path)
        return out

    def _foreign(self, intent: Intent, command: str) -> Outcome:
        """Left open, in doubt, nothing written: its command was not written here."""
        what = "command" if intent.tool == "exec" else "check"
        return self._outcome(
            intent, IN_DOUBT, "left-open",
            f"its {what} {command!r} was not written in this clone (a fetched or forged "
            "log); it was not run and nothing was changed", open_=True)

    def _outcome(self, intent: Intent, outcome: str, action: str, detail: str,
                 changed: tuple[str, ...] = (), open_: bool = False,
                 saved: tuple[tuple[str, str, str], ...] = ()) -> Outcome:
        return Outcome(intent.lsn, intent.tool, intent.args, intent.target, outcome,
                       action, detail, changed, open_, intent.step, saved)

    def _decide(self, intent: Intent, dry_run: bool) -> Outcome:
        if intent.tool == "exec":
            return self._decide_exec(intent, dry_run)
        return self._decide_file(intent, dry_run)

    def _decide_unwritten(self, intent: Intent) -> Outcome:
        """An intent this clone did not write (fetched, from another clone, an
        older gitwal, or forged): decided by hash, but none of its images is
        written into the tree, and nothing of it is run."""
        seen = self._decide(intent, dry_run=True)
        if seen.outcome == APPLIED and intent.tool != "exec":
            return self._commit_found(intent, APPLIED, "applied; commit was missing",
                                      "committed")
        if seen.outcome == NOT_APPLIED:
            self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                               "recovery: not applied; not redone (not written in this "
                               "clone)", ()))
            return self._outcome(intent, NOT_APPLIED, "aborted", seen.detail + "; redo it")
        return self._outcome(
            intent, IN_DOUBT, "left-open",
            f"{seen.detail}; this step was not written in this clone (a fetched, older or "
            "forged log): gitwal writes none of its images into the tree", seen.changed,
            True)

    def _committed_elsewhere(self) -> dict[tuple[str, str], str]:
        """(path, state) -> "by run R at LSN n" for every change another run
        committed (read once per recovery; runs that do not read are skipped:
        an unreadable log explains nothing)."""
        if self._others is None:
            self._others = {}
            for rid in list_runs(self.store.repo):
                if rid == self.store.run:
                    continue
                try:
                    for path, held in changes(self.wt, Chain(self.store.repo, rid).forward(),
                                              Rules(lenient=True)):
                        self._others[(path, held.state)] = f"by run {rid} at LSN {held.lsn}"
                except WalError:
                    continue
        return self._others

    def _refuse_own_call(self, open_intents: list[Intent]) -> None:
        """An agent's shell call has no command lock (the agent runs it, not
        gitwal): when this recovery runs inside that agent's tool call, an open
        shell intent of the agent is a call still running, most likely the one
        running this very command. Deciding it now would abort a live step."""
        for intent in open_intents:
            tag = agent_tag(intent)
            if (self.inside is None or intent.tool != "exec" or tag is None
                    or tag.get("name") != self.inside):
                continue
            raise RunBusy(
                f"run {self.store.run}: LSN {intent.lsn} is a {tag.get('tool', 'shell')} "
                f"call of {self.inside} that has not finished, and this recovery runs "
                f"inside a {self.inside} tool call (most likely that very call)",
                "the agent's hooks recover its run when a session starts; `git wal "
                "prompt` shows the state without deciding anything; run `git wal "
                "recover` from a terminal when the agent has stopped",
            )



__all__ = ["Drift", "Outcome", "Recovery", "Report", "to_dict"]
