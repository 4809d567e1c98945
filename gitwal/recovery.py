"""Recovery: decide, for every open intent, whether it landed, and repair.

Decision table (docs/recovery.md is the normative copy):

==========================  ==========================  ===========================
state of the target(s)      outcome                     what recovery does
==========================  ==========================  ===========================
all == post                 applied-missing-commit      re-run the check; commit
all == pre                  not-applied                 redo if --redo and replay
                                                        safe; else abort (redo it)
anything else               torn                        restore pre-images, then
                                                        as not-applied
exec, tree == pre tree      not-applied                 as above (redo: re-run)
exec, tree differs          in-doubt                    list changed paths; restore
                                                        them only with --restore
==========================  ==========================  ===========================

Recovery touches only paths the log names (and gitwal's own temp files next to
them), and only in the ways the report states.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pygit2

from .agent_call import agent_tag
from .authorship import foreign_command, written_here
from .chain import Chain
from .durable import crash_point
from .effects import apply_post, missing_images, restore_pre, run_check, run_command
from .errors import RunBusy, WalError
from .ids import CommitId, Lsn, TreeId
from .overwrite import (
    DIRECTORY,
    SPECIAL,
    Kept,
    Saved,
    bring_back_tree,
    describe,
    found,
    restore_plan,
    restore_tree,
    save,
    torn_prefix,
)
from .prompt import redo_command, remaining_steps, render
from .records import REPLAY_SAFE, Abort, Checkpoint, Commit, Intent, Plan, Record, to_dict
from .run import watched_paths
from .store import Ref, Store, list_runs
from .worktree import Worktree, tree_state

APPLIED = "applied-missing-commit"
NOT_APPLIED = "not-applied"
TORN = "torn"
IN_DOUBT = "in-doubt"
SUPERSEDED = "superseded"  # a target now holds another run's committed change

# Whose bytes a target holds (Recovery._kind).
PRE, POST, TORN_POST, FOREIGN = "pre", "post", "torn-post", "foreign"
OTHER_RUN = "other-run "


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


@dataclass(frozen=True)
class Report:
    run: str
    plan: Plan
    records: int
    committed: tuple[Intent, ...]  # committed intents after the newest checkpoint
    aborted: tuple[Lsn, ...]
    outcomes: tuple[Outcome, ...]
    drift: tuple[Drift, ...]
    cleared_lock: bool
    removed_temp: tuple[str, ...] = field(default=())
    checkpoint: Checkpoint | None = None  # the newest checkpoint (the report starts there)

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
                {"step": n, "text": text} for n, text in remaining_steps(self)
            ],
            "records": self.records,
            "next_lsn": self.next_lsn,
            "committed_through": self.last_committed,
            "committed_total": self.committed_total,
            "checkpoint": None if self.checkpoint is None else {
                "lsn": self.checkpoint.lsn, "git": self.checkpoint.git,
                "ref": self.checkpoint.ref, "covers": self.checkpoint.covers,
            },
            "committed": [
                {"lsn": i.lsn, "tool": i.tool, "target": list(i.target), "step": i.step}
                for i in self.committed
            ],
            "aborted": list(self.aborted),
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
            "cleared_stale_lock": self.cleared_lock,
            "removed_temp_files": list(self.removed_temp),
            "in_doubt": self.in_doubt,
        }

    def prompt(self) -> str:
        return render(self)


class Recovery:
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
        committed, aborted, drift = summarise(after, self.wt, self.store.repo)
        cp = after[0] if isinstance(after[0], Checkpoint) else None
        return Report(
            run=self.store.run, plan=plan, records=after[-1].lsn, committed=committed,
            aborted=aborted, outcomes=tuple(outcomes), drift=drift,
            cleared_lock=cleared, removed_temp=tuple(removed), checkpoint=cp,
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
                for path, state, lsn in committed_states(records, self.wt, self.store.repo):
                    self._others[(path, state)] = f"by run {rid} at LSN {lsn}"
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

    def _running(self, intent: Intent) -> str:
        if self.store.command_running(intent.lsn) is None:
            return ""
        return "; its command is still running (recovery waits until it exits)"

    def _decide_exec(self, intent: Intent, dry_run: bool) -> Outcome:
        pre_tree = TreeId(intent.pre[0])
        if not isinstance(self.store.repo.get(pre_tree), pygit2.Tree):
            return self._outcome(
                intent, IN_DOUBT, "none" if dry_run else "left-open",
                f"in doubt: its pre tree {pre_tree[:12]} is not in the object database "
                "(pruned, or the log names an object it never stored); nothing was restored",
                (), True)
        now = self.wt.snapshot(self.store.run, watched_paths(intent))
        if now != pre_tree:
            return self._exec_changed(intent, pre_tree, now, dry_run)
        # Nothing visible changed. Only a command that never started is "not
        # applied" as a fact: one that ran may have changed what a snapshot
        # does not see (ignored files, submodules, skip-worktree paths).
        started = agent_tag(intent) is not None or self.store.command_started(intent.lsn)
        if not started:
            if dry_run:
                return self._outcome(intent, NOT_APPLIED, "none", "not applied (its command "
                                     "never started)")
            if self.redo and intent.replay == REPLAY_SAFE:
                return self._redo_exec(intent, pre_tree, NOT_APPLIED)
            self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                               "recovery: not applied (never started); not redone", ()))
            return self._outcome(intent, NOT_APPLIED, "aborted",
                                 "not applied (its command never started); redo it")
        detail = ("in doubt: no change the snapshot can see, but its command may have run "
                  "(changes to ignored or untracked-by-snapshot paths are invisible)")
        if dry_run:
            return self._outcome(intent, IN_DOUBT, "none", detail + self._running(intent),
                                 (), True)
        if self.redo and intent.replay == REPLAY_SAFE:
            return self._redo_exec(intent, pre_tree, IN_DOUBT)  # declared safe to run twice
        if self.restore:
            self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                               f"recovery: {detail}; given up by request (--restore)", ()))
            return self._outcome(intent, IN_DOUBT, "aborted",
                                 detail + "; nothing visible to restore, closed (--restore)")
        return self._outcome(intent, IN_DOUBT, "left-open", detail, (), True)

    def _exec_changed(self, intent: Intent, pre_tree: TreeId, now: TreeId,
                      dry_run: bool) -> Outcome:
        changed = tuple(self.wt.changed_paths(pre_tree, now))
        detail = f"command may have run: {len(changed)} path(s) differ from the pre tree"
        if dry_run:
            return self._outcome(intent, IN_DOUBT, "none", detail + self._running(intent),
                                 changed, True)
        if not self.restore:
            return self._outcome(intent, IN_DOUBT, "left-open", detail, changed, True)
        # Another run's committed change is not this step's to undo.
        elsewhere = self._committed_elsewhere()
        theirs = [p for p in changed if (p, tree_state(self.store.repo, now, p)) in elsewhere]
        plan, moved = restore_plan(self.wt, now, [p for p in changed if p not in theirs])
        # The abort (and its append, which keeps the snapshot ``now``) is
        # durable before anything is put back: every byte the restore
        # overwrites can be brought back from that tree.
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                           "recovery: in doubt; restored the pre tree by request",
                           tuple(plan), saved=((".", now),) if plan else ()),
                     [Ref(now, is_tree=True)])
        undo = restore_tree(self.wt, pre_tree, now, plan, f"r{intent.lsn}")
        detail += f"; restored {len(undo.restored)} path(s) to the pre tree"
        if undo.restored:
            cmd = bring_back_tree(now, undo.restored)
            detail += f"; what they held is saved: `{cmd}` brings it back"
        if theirs:
            detail += "; left " + ", ".join(
                f"{p} (committed {elsewhere[(p, tree_state(self.store.repo, now, p))]})"
                for p in theirs)
        if moved or undo.kept:
            detail += f"; left in place (changed since): {describe((*moved, *undo.kept))}"
        saved = ((".", now, bring_back_tree(now, undo.restored)),) if undo.restored else ()
        return self._outcome(intent, IN_DOUBT, "restored", detail, changed, saved=saved)

    def _redo_exec(self, intent: Intent, pre_tree: TreeId, outcome: str) -> Outcome:
        with self.store.command_lock(intent.lsn) as hold:
            ran = run_command(intent.args["argv"], self.wt, intent, hold)
            post = self.wt.snapshot(self.store.run, watched_paths(intent))
            ok, failure = ran.ok, ran.failure
            output = ""
            if ok and intent.check:
                result = run_check(intent.check, self.wt, intent, hold)
                ok, output = result.ok, result.output
                failure = result.failure
        if ok:
            self._append(Commit(self.store.run, self.next_lsn, intent.lsn, (post,),
                                "exit 0 (redone by recovery)", True),
                         [Ref(post, is_tree=True)])
            return self._outcome(intent, outcome, "redone", f"{outcome}; redone")
        changed = self.wt.changed_paths(pre_tree, post)
        plan, _moved = restore_plan(self.wt, post, changed)
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                           f"recovery: redo failed ({failure})", tuple(plan), output,
                           saved=((".", post),) if plan else ()),
                     [Ref(post, is_tree=True)])
        undo = restore_tree(self.wt, pre_tree, post, plan, f"r{intent.lsn}")
        return self._outcome(intent, outcome, "aborted",
                             f"{outcome}; redo failed ({failure}), {len(undo.restored)} "
                             "changed path(s) restored")


def committed_states(records: list[Record], wt: Worktree, repo: pygit2.Repository
                     ) -> Iterator[tuple[str, str, Lsn]]:
    """(path, state, intent LSN) for every path each committed step set, in
    log order (for an exec step: every path its pre and post trees differ in)."""
    intents = {r.lsn: r for r in records if isinstance(r, Intent)}
    for rec in records:
        if not isinstance(rec, Commit) or rec.intent not in intents:
            continue
        intent = intents[rec.intent]
        if intent.tool == "exec":
            for path in wt.changed_paths(TreeId(intent.pre[0]), TreeId(rec.post[0])):
                yield path, tree_state(repo, rec.post[0], path), intent.lsn
        else:
            for path, post in zip(intent.target, rec.post, strict=True):
                yield path, post, intent.lsn


def summarise(
    records: list[Record], wt: Worktree, repo: pygit2.Repository
) -> tuple[tuple[Intent, ...], tuple[Lsn, ...], tuple[Drift, ...]]:
    """Committed steps, aborted intents, and drift of committed paths."""
    intents = {r.lsn: r for r in records if isinstance(r, Intent)}
    committed = tuple(intents[r.intent] for r in records
                      if isinstance(r, Commit) and r.intent in intents)
    aborted = tuple(r.intent for r in records if isinstance(r, Abort))
    expected: dict[str, tuple[str, Lsn]] = {}
    for path, state, lsn in committed_states(records, wt, repo):
        expected[path] = (state, lsn)
    drift = []
    for path, (want, lsn) in sorted(expected.items()):
        have = found(wt, path)
        if have != want:
            drift.append(Drift(path, lsn, want, have))
    return committed, aborted, tuple(drift)


__all__ = ["Drift", "Outcome", "Recovery", "Report", "to_dict"]
