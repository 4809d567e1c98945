"""Recovery: decide, for every open intent, whether it landed, and repair.

Decision table for file tools (docs/recovery.md is the normative copy; shell
steps: recovery_exec.py). Each target holds the step's own bytes (pre, post,
a torn prefix of post), another run's committed change, or someone else's:

====================================  ===============  ===========================
targets                               outcome          what recovery does
====================================  ===============  ===========================
all post                              applied-missing  re-run the check; commit
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

from .authorship import foreign_command, written_here
from .chain import Chain
from .codec import to_dict
from .durable import crash_point
from .effects import apply_post, missing_images, restore_pre, run_check
from .errors import RunBusy, WalError
from .ids import CommitId, Lsn
from .ledger import Rules, changes
from .overwrite import (
    DIRECTORY,
    SPECIAL,
    Kept,
    Saved,
    describe,
    found,
    save,
    torn_prefix,
)
from .records import REPLAY_SAFE, Abort, Checkpoint, Commit, Intent, Record, agent_tag
from .recovery_exec import ExecDecisions
from .report import (
    APPLIED,
    IN_DOUBT,
    NOT_APPLIED,
    SUPERSEDED,
    TORN,
    Drift,
    Outcome,
    Report,
    summarise,
    undone_steps,
)
from .store import Ref, Store, list_runs
from .worktree import Worktree

# Whose bytes a target holds (Recovery._kind).
PRE, POST, TORN_POST, FOREIGN = "pre", "post", "torn-post", "foreign"
OTHER_RUN = "other-run "


class Recovery(ExecDecisions):
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
        self._others: dict[tuple[str, str], str] | None = None

    def _append(self, record: Record, refs: list[Ref] | None = None) -> None:
        self.head = self.store.append([record], refs or [], self.head)
        self.next_lsn = Lsn(self.next_lsn + 1)
        self.appended.append(record)

    def run(self, dry_run: bool = False) -> Report:
        cleared = False if dry_run else self.store.clear_stale_ref_lock()
        records = self.store.segment()
        self.head = self.store.head()
        self.next_lsn = Lsn(records[-1].lsn + 1)
        plan = self.store.plan(records[0])
        intents: dict[Lsn, Intent] = {}
        closed: set[Lsn] = set()
        for rec in records:
            if isinstance(rec, Intent):
                intents[rec.lsn] = rec
            elif isinstance(rec, (Commit, Abort)):
                closed.add(rec.intent)
        open_intents = [i for lsn, i in intents.items() if lsn not in closed]
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
            finished, cleared_temps = self._finish_restores(records)
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
            if dry_run or written_here(self.store.repo, intent):
                outcome = self._decide(intent, dry_run)
            else:
                outcome = self._decide_unwritten(intent)
            outcomes.append(outcome)
            if intent.tool == "exec" and not dry_run and not outcome.open:
                self.store.clear_command_lock(intent.lsn)
        # Under the run lock nobody else appends: the log is what we read plus
        # what we added (no second walk of the chain).
        after = records + self.appended
        committed, aborted, drift = summarise(after, self.wt)
        cp = after[0] if isinstance(after[0], Checkpoint) else None
        return Report(
            run=self.store.run, plan=plan, records=after[-1].lsn, committed=committed,
            aborted=aborted, outcomes=tuple(outcomes), drift=drift,
            cleared_lock=cleared, removed_temp=tuple(removed), checkpoint=cp,
            finished_restore=finished,
            undone=undone_steps(after, {o.lsn for o in outcomes}),
        )

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
        assert intent.post is not None
        now = tuple(found(self.wt, p) for p in intent.target)
        if now == intent.post:
            if dry_run:
                return self._outcome(intent, APPLIED, "none", "applied; commit is missing")
            return self._commit_found(intent, APPLIED, "applied; commit was missing",
                                      "committed")
        kinds = [self._kind(intent, i, state) for i, state in enumerate(now)]
        foreign = tuple(p for p, k in zip(intent.target, kinds, strict=True) if k == FOREIGN)
        others = [(p, k) for p, k in zip(intent.target, kinds, strict=True)
                  if k.startswith(OTHER_RUN)]
        if foreign:
            return self._decide_foreign(intent, now, foreign, dry_run)
        outcome, detail = NOT_APPLIED, "not applied"
        if others:
            outcome = SUPERSEDED
            detail = "; ".join(f"{p} now holds the change {k[len(OTHER_RUN):]} committed "
                               "(left as it is)" for p, k in others)
        elif now != intent.pre:
            outcome, detail = TORN, "partially applied (its own bytes: pre, post or a torn post)"
        if dry_run:
            return self._outcome(intent, outcome, "none", detail)
        restored: tuple[str, ...] = ()
        if any(k in (POST, TORN_POST) for k in kinds):
            if (missing := missing_images(self.store.repo, intent)):
                return self._missing(intent, missing)
            restored = restore_pre(self.wt, intent).restored
            detail += f"; restored {', '.join(restored)} from the pre-image"
        if self.redo and intent.replay == REPLAY_SAFE and not others:
            kept = apply_post(self.wt, intent)
            if not kept:
                return self._commit_found(intent, outcome, detail + "; redone", "redone")
            restored += restore_pre(self.wt, intent).restored
            detail += f"; not redone: {describe(kept)} changed meanwhile"
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                           f"recovery: {detail}; not redone", restored))
        return self._outcome(intent, outcome, "aborted",
                             detail + ("" if others else "; redo it"))

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

    def _kind(self, intent: Intent, i: int, state: str) -> str:
        """Whose bytes target ``i`` holds: the step's own (pre, post, a torn
        post), another run's committed change, or someone else's."""
        assert intent.post is not None
        if state == intent.pre[i]:
            return PRE
        if state == intent.post[i]:
            return POST
        if torn_prefix(self.store.repo, self.wt, intent.target[i], intent.post[i],
                       intent.pre[i]):
            return TORN_POST
        by = self._committed_elsewhere().get((intent.target[i], state))
        if by is not None:
            return OTHER_RUN + by
        return FOREIGN

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
                    records = Chain(self.store.repo, rid).segment()
                except WalError:
                    continue
                for path, held in changes(self.wt, records, Rules(lenient=True)):
                    self._others[(path, held.state)] = f"by run {rid} at LSN {held.lsn}"
        return self._others

    def _decide_foreign(self, intent: Intent, now: tuple[str, ...],
                        foreign: tuple[str, ...], dry_run: bool) -> Outcome:
        """A target holds bytes gitwal did not write (a person's edit, a delete,
        ``git reset --hard``): never overwritten on gitwal's own authority. In
        doubt; ``--restore`` first saves them in the log, then restores."""
        shown = describe(Kept(p, s) for p, s in zip(intent.target, now, strict=True)
                         if p in foreign)
        detail = f"in doubt: {shown}"
        if dry_run or not self.restore:
            return self._outcome(intent, IN_DOUBT, "none" if dry_run else "left-open", detail,
                                 foreign, True)
        if (missing := missing_images(self.store.repo, intent)):
            return self._missing(intent, missing)
        saved: list[Saved] = []
        for p, state in zip(intent.target, now, strict=True):
            if p in foreign and state in (DIRECTORY, SPECIAL):
                return self._outcome(intent, IN_DOUBT, "left-open",
                                     detail + "; --restore cannot save a directory or a "
                                     "special file: move it away, then recover again",
                                     foreign, True)
            if p in foreign and (one := save(self.wt, p)) is not None:
                saved.append(one)
        # Durable before anything is overwritten: the abort's append keeps
        # the saved blobs alive (git gc --prune=now included) and names them.
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                           f"recovery: {detail}; restored by request (--restore)",
                           tuple(p for p, s, pre in zip(intent.target, now, intent.pre,
                                                        strict=True) if s != pre),
                           saved=tuple((s.path, s.blob) for s in saved)),
                     [Ref(s.blob) for s in saved])
        restored = restore_pre(self.wt, intent, also={s.blob for s in saved})
        back = "; ".join(f"`{s.command()}` brings back {s.path}" for s in saved)
        return self._outcome(
            intent, IN_DOUBT, "restored",
            detail + f"; restored {', '.join(restored.restored) or 'nothing'} from the "
            "pre-image" + (f"; what was found is saved: {back}" if back else ""),
            foreign, saved=tuple((s.path, s.blob, s.command()) for s in saved))

    def _missing(self, intent: Intent, paths: list[str]) -> Outcome:
        return self._outcome(
            intent, IN_DOUBT, "left-open",
            f"in doubt: the pre-image of {', '.join(paths)} is not in the object database "
            "(pruned, or the log names an object it never stored); nothing was restored",
            tuple(paths), True)

    def _commit_found(
        self, intent: Intent, outcome: str, detail: str, action: str
    ) -> Outcome:
        """Verify an intent whose post-image is on disk, then commit (or abort)."""
        assert intent.post is not None
        observed = tuple(found(self.wt, p) for p in intent.target)
        ok = observed == intent.post
        output = ""
        if ok and intent.check:
            result = run_check(intent.check, self.wt, intent)
            ok, output = result.ok, result.output
        crash_point("after-verify")
        if not ok:
            if (missing := missing_images(self.store.repo, intent)):
                return self._missing(intent, missing)
            undo = restore_pre(self.wt, intent)
            left = f"; left in place: {describe(undo.kept)}" if undo.kept else ""
            self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                               "recovery: verification failed" + left, undo.restored, output))
            return self._outcome(intent, outcome, "aborted",
                                 detail + "; verification failed, pre-image restored" + left)
        verified = "hash==post" + (f" && check ok: {intent.check}" if intent.check else "")
        self._append(Commit(self.store.run, self.next_lsn, intent.lsn, observed,
                            verified, recovered=True))
        return self._outcome(intent, outcome, action, detail + "; now committed")

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



__all__ = ["Drift", "Outcome", "Recovery", "Report", "summarise",
           "to_dict"]
