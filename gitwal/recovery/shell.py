"""Recovery's decisions for shell steps (``exec`` intents), docs/recovery.md
"Decisions for exec": a step is "not applied" only when its command provably
never started; one whose tree changed is in doubt, and ``--restore`` saves
the snapshot in the log before it puts any path back."""

from __future__ import annotations

import pygit2

from ..base.ids import TreeId
from ..changes.commands import CheckResult, run_check, run_command
from ..log.store import Ref
from ..records.model import REPLAY_SAFE, Abort, Commit, Intent, agent_tag
from ..together.shell_among import Named, among, left_to_others
from ..worktree.overwrite import bring_back_tree, describe, found, restore_plan, restore_tree
from ..worktree.snapshot import watched_paths
from ..worktree.treeread import tree_state
from .host import DecisionHost
from .report import APPLIED, AWAITING_APPROVAL, IN_DOUBT, NOT_APPLIED, Outcome


class ExecDecisions(DecisionHost):
    """Mixed into :class:`gitwal.recovery.decide.Recovery` (see host.py)."""

    def _finish_restores(self, trailing: list[tuple[Abort, Intent]]
                         ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Finish a shell step's restore that a crash cut short.

        The abort of a restored exec is durable before its paths are put
        back (it keeps the snapshot they held), so a kill mid-restore leaves
        the abort as the log's last word and some paths still as the command
        left them. Those still holding exactly the saved snapshot's state are
        put back now; any other content is not gitwal's and stays. Only the
        trailing aborts are finished (``trailing``: scan.Scan.trailing_restores):
        after a later intent the tree is the agent's again. Returns (paths
        put back, paths whose temp files the killed restore left were removed)."""
        done: list[str] = []
        cleared: list[str] = []
        for rec, intent in trailing:
            cleared += [p for p in rec.restored if self.wt.clear_temp(p, f"r{intent.lsn}")]
            pre = TreeId(intent.pre[0])
            saved = TreeId(rec.saved[0][1])
            if not (isinstance(self.store.repo.get(pre), pygit2.Tree)
                    and isinstance(self.store.repo.get(saved), pygit2.Tree)):
                continue  # a damaged log: decided elsewhere (repair), never guessed
            left = [p for p in rec.restored
                    if found(self.wt, p) != tree_state(self.store.repo, pre, p)]
            if left:
                done.extend(restore_tree(self.wt, pre, saved, left, f"r{intent.lsn}").restored)
        return tuple(done), tuple(cleared)

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
        # An agent's irreversible call is approved in the agent's prompt, and run by
        # the agent (no command lock): decided as any shell call of an agent.
        if (intent.args.get("irreversible") is True and agent_tag(intent) is None
                and not self.store.command_started(intent.lsn)):
            return self._waiting(intent, pre_tree, dry_run)
        now = self.wt.snapshot(self.store.run, watched_paths(intent))
        # Paths other runs' steps committed while it ran are theirs: neither
        # this step's change nor restored (shell_among.py).
        among_ = among(self.store.repo, self.store.run, intent, now)
        skip = {t[0] for t in among_[0]}
        mine = [p for p in self.wt.changed_paths(pre_tree, now) if p not in skip]
        if mine:
            return self._exec_changed(intent, pre_tree, now, dry_run, mine, among_)
        # Nothing visible changed. Only a command that never started is "not
        # applied" as a fact: one that ran may have changed what a snapshot
        # does not see (ignored files, submodules, skip-worktree paths).
        started = agent_tag(intent) is not None or self.store.command_started(intent.lsn)
        probe = None if dry_run or not started else self._probe(intent)
        if probe is not None and probe.code == 0:
            return self._confirmed(intent, now, "no change the snapshot can see", among_)
        if probe is not None and probe.code == 1:
            started = False  # its probe says it did not happen: decided as never started
        if not started:
            why = ("its confirm probe exited 1" if probe is not None
                   else "its command never started")
            if dry_run:
                return self._outcome(intent, NOT_APPLIED, "none", f"not applied ({why})")
            if self.redo and intent.replay == REPLAY_SAFE:
                return self._redo_exec(intent, pre_tree, NOT_APPLIED)
            self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                               f"recovery: not applied ({why}); not redone", (),
                               theirs=among_[0], claimed=among_[1]))
            return self._outcome(intent, NOT_APPLIED, "aborted",
                                 f"not applied ({why}); redo it")
        detail = ("in doubt: no change the snapshot can see, but its command may have run "
                  "(changes to ignored or untracked-by-snapshot paths are invisible)"
                  + _probe_note(probe))
        if dry_run:
            return self._outcome(intent, IN_DOUBT, "none", detail + self._running(intent),
                                 (), True)
        if self.redo and intent.replay == REPLAY_SAFE:
            return self._redo_exec(intent, pre_tree, IN_DOUBT)  # declared safe to run twice
        if self.restore:
            self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                               f"recovery: {detail}; given up by request (--restore)", (),
                               theirs=among_[0], claimed=among_[1]))
            return self._outcome(intent, IN_DOUBT, "aborted",
                                 detail + "; nothing visible to restore, closed (--restore)")
        return self._outcome(intent, IN_DOUBT, "left-open", detail, (), True)

    def _exec_changed(self, intent: Intent, pre_tree: TreeId, now: TreeId,
                      dry_run: bool, mine: list[str], among_: tuple[Named, Named]
                      ) -> Outcome:
        changed = tuple(mine)
        detail = f"command may have run: {len(changed)} path(s) differ from the pre tree"
        if dry_run:
            return self._outcome(intent, IN_DOUBT, "none", detail + self._running(intent),
                                 changed, True)
        probe = self._probe(intent)
        if probe is not None and probe.code == 0:
            return self._confirmed(intent, now, detail, among_)
        denied = probe is not None and probe.code == 1  # it did not happen: put back
        detail += _probe_note(probe)
        if not self.restore and not denied:
            return self._outcome(intent, IN_DOUBT, "left-open", detail, changed, True)
        # Another run's committed change is not this step's to undo, nor one
        # another run's open step may be making (shell_among.left_to_others).
        elsewhere = self._committed_elsewhere()
        theirs = [p for p in changed if (p, tree_state(self.store.repo, now, p)) in elsewhere]
        left = left_to_others(self.store.repo, self.wt, self.store.run,
                              [p for p in changed if p not in theirs], now)
        plan, moved = restore_plan(self.wt, now, [p for p in changed if p not in theirs
                                                  and p not in left])
        # The abort (and its append, which keeps the snapshot ``now``) is
        # durable before anything is put back: every byte the restore
        # overwrites can be brought back from that tree.
        why = ("not applied per its confirm probe (exit 1); restored the pre tree" if denied
               else "in doubt; restored the pre tree by request")
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn, f"recovery: {why}",
                           tuple(plan), saved=((".", now),) if plan else (),
                           theirs=among_[0], claimed=among_[1]),
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
        if left:
            detail += "; left " + ", ".join(f"{p} ({why})" for p, why in sorted(left.items()))
        if moved or undo.kept:
            detail += f"; left in place (changed since): {describe((*moved, *undo.kept))}"
        saved = ((".", now, bring_back_tree(now, undo.restored)),) if undo.restored else ()
        return self._outcome(intent, NOT_APPLIED if denied else IN_DOUBT, "restored", detail,
                             changed, saved=saved)

    def _waiting(self, intent: Intent, pre_tree: TreeId, dry_run: bool) -> Outcome:
        """An irreversible step whose command never started: it waits for a
        person's approval, and keeps waiting across crashes (approvals.py);
        approved, ``--redo`` runs it, once."""
        # "left-open" even when only looking: recovery has nothing to decide here.
        approval = self.approved.get(intent.lsn)
        if approval is None:
            data = "".join(f"; approval LSN {a.lsn} ({a.approved_by}) was not written in this "
                           "clone nor signed by a key you trust: data here"
                           for a in self.unapproved)
            return self._outcome(
                intent, AWAITING_APPROVAL, "left-open",
                "irreversible: waits for a person's approval (`git wal approve "
                f"{intent.lsn}`); nothing of it has run" + data, (), True)
        by = f"approved by {approval.approved_by} (LSN {approval.lsn})"
        if self.redo and not dry_run:
            return self._redo_exec(intent, pre_tree, AWAITING_APPROVAL, f"{by}; run now")
        return self._outcome(
            intent, AWAITING_APPROVAL, "left-open",
            f"irreversible, {by}; not run yet: run the same command again, or `git wal "
            "recover --redo`", (), True)

    def _probe(self, intent: Intent) -> CheckResult | None:
        """Run the step's confirm probe (None: it has none, or its command still
        runs). Only a probe this clone wrote runs (commands.run_check)."""
        probe = intent.args.get("confirm")
        if not isinstance(probe, str) or self.store.command_running(intent.lsn) is not None:
            return None
        return run_check(probe, self.wt, intent, role="confirm")

    def _confirmed(self, intent: Intent, now: TreeId, detail: str,
                   among_: tuple[Named, Named]) -> Outcome:
        """The probe says the step happened: committed with the tree as found."""
        probe = intent.args["confirm"]
        self._append(Commit(self.store.run, self.next_lsn, intent.lsn, (now,),
                            f"confirmed: {probe} exited 0 (recovery)", True,
                            theirs=among_[0], claimed=among_[1]),
                     [Ref(now, is_tree=True)])
        return self._outcome(intent, APPLIED, "committed",
                             f"{detail}; its confirm probe exited 0: it happened, committed "
                             "as found")

    def _redo_exec(self, intent: Intent, pre_tree: TreeId, outcome: str,
                   note: str = "") -> Outcome:
        with self.store.command_lock(intent.lsn) as hold:
            ran = run_command(intent.args["argv"], self.wt, intent, hold)
            post = self.wt.snapshot(self.store.run, watched_paths(intent))
            ok, failure = ran.ok, ran.failure
            output = ""
            if ok and intent.check:
                result = run_check(intent.check, self.wt, intent, hold)
                ok, output = result.ok, result.output
                failure = result.failure
        theirs, claimed = among(self.store.repo, self.store.run, intent, post)
        if ok:
            self._append(Commit(self.store.run, self.next_lsn, intent.lsn, (post,),
                                "exit 0 (redone by recovery)", True, theirs=theirs,
                                claimed=claimed),
                         [Ref(post, is_tree=True)])
            return self._outcome(intent, outcome, "redone", f"{note or outcome}; redone")
        changed = [p for p in self.wt.changed_paths(pre_tree, post)
                   if p not in {t[0] for t in theirs}]
        plan, _moved = restore_plan(self.wt, post, changed)
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                           f"recovery: redo failed ({failure})", tuple(plan), output,
                           saved=((".", post),) if plan else (), theirs=theirs,
                           claimed=claimed),
                     [Ref(post, is_tree=True)])
        undo = restore_tree(self.wt, pre_tree, post, plan, f"r{intent.lsn}")
        return self._outcome(intent, outcome, "aborted",
                             f"{outcome}; redo failed ({failure}), {len(undo.restored)} "
                             "changed path(s) restored")


def _probe_note(probe: CheckResult | None) -> str:
    if probe is None:
        return ""
    if probe.code == 1:
        return "; its confirm probe exited 1: it did not happen"
    status = "was killed at its time limit" if probe.code is None else f"exited {probe.code}"
    return f"; its confirm probe {status}: still in doubt"
