"""Shell steps: a command whose effect is unknown in advance, run as a
logged step (``git wal exec``).

The same protocol as a file step (run.py), with trees for images: the intent
names a snapshot of the tree taken before the command, and the closing record
the snapshot after it. The snapshots leave out what git ignores (unless
watched) and secret-looking files (worktree/secretfiles.py). On abort, only
what the command changed goes back, and never a path another run committed
or is changing meanwhile (together/shell_among.py); the abort is durable,
with the after snapshot, before anything is put back. A step logged as
irreversible runs nothing until a person approves it; then the same command
again runs it (decisions/approvals.py, through :meth:`ShellSteps.run_logged`),
or ``recover --redo`` does.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from .base.crashpoints import crash_point
from .base.errors import NeedsApproval, NotOnRemote, StepFailed, ToolRefused
from .base.ids import CommitId, Lsn, TreeId
from .changes.commands import CommandResult, command_timeout, run_check, run_command
from .log.authorship import attach
from .log.store import Ref
from .records.model import REPLAY_SAFE, REPLAY_UNSAFE, Abort, Commit, Intent
from .run_log import RunLog
from .steps_api import StepResult
from .together.shell_among import OTHERS_ARG, among, left_to_others, others_now
from .worktree import secretfiles
from .worktree.overwrite import bring_back_tree, left_note, restore_plan, restore_tree
from .worktree.snapshot import watched_paths
from .worktree.tree import MODE_TREE


class ShellSteps(RunLog):
    """A run's shell steps; a base of :class:`gitwal.run.Run`."""

    def exec(
        self,
        argv: Sequence[str],
        check: str | None = None,
        idempotent: bool = False,
        step: int | None = None,
        watch: Sequence[str] = (),
        timeout: float | None = None,
        confirm: str | None = None,
        irreversible: bool = False,
    ) -> StepResult:
        """Run a command whose effect is unknown in advance, as a logged step.

        ``watch``: paths whose ignored files the snapshots include too, so a
        command that changes only those is seen (recorded in the intent).
        ``confirm``: a probe (``sh -c``) recovery runs to decide the step if a
        crash leaves it in doubt: exit 0, it happened; 1, it did not; else
        still in doubt (docs/recovery.md).
        ``timeout``: seconds the command, and then the check, may each run
        (default: wal.commandTimeout); past it its process group is killed."""
        if not argv:
            raise ToolRefused("exec: no command given", "git wal exec -- CMD ARG...")
        if confirm is not None and not confirm.strip():
            raise ToolRefused("exec: --confirm needs a command",
                              'e.g. --confirm "test -f dist/app.js"')
        watched = sorted({self.wt.confine_any(w) for w in watch})
        timeout = command_timeout(self.wt, timeout)  # a bad setting fails before the intent
        with self.store.locked():
            head, lsn = self._next()
            # Read before the snapshot: what other runs commit from here on is
            # either in the pre tree or found at the closing (shell_among.py).
            others = others_now(self.store.repo, self.id)
            pre_tree = self.wt.snapshot(self.id, watched)
            hidden = secretfiles.before(self.wt, watched)  # what snapshots leave out
            crash_point("after-snapshot")
            args: dict[str, Any] = {"argv": list(argv)}
            if others:
                args[OTHERS_ARG] = others
            if watched:
                args["watch"] = watched
            if confirm is not None:
                args["confirm"] = confirm
            if irreversible:
                args["irreversible"] = True
            intent = attach(self.store.repo, Intent(
                run=self.id, lsn=lsn, tool="exec", args=args,
                target=(".",), pre=(pre_tree,), post=None, mode=(MODE_TREE,),
                replay=REPLAY_SAFE if idempotent else REPLAY_UNSAFE,
                key=f"{self.id}:{lsn}", check=check, step=step,
            ))
            head = self.store.append([intent], [Ref(pre_tree, is_tree=True)], head)
            crash_point("after-intent")
            if irreversible:
                raise NeedsApproval(
                    f"LSN {lsn} exec {shlex.join(argv)}: logged as irreversible; it needs a "
                    "person's approval before it runs (nothing has run)",
                    f"ask the user to run `git wal approve {lsn}`, then run the same command "
                    "again (or `git wal recover --redo`)")
            return self.run_logged(intent, head, intent.lsn, timeout, hidden)

    def run_logged(self, intent: Intent, head: CommitId, newest: Lsn,
                   timeout: float | None = None,
                   hidden: secretfiles.Before | None = None) -> StepResult:
        """Run the command of the open exec ``intent`` and close it; ``head``
        and ``newest``: the log's head commit and newest LSN (the intent, or
        the approval that follows it). The caller holds the run lock.
        ``hidden``: the secret-looking files snapshots leave out, as they
        were before the command (taken now when not given)."""
        if hidden is None:
            hidden = secretfiles.before(self.wt, watched_paths(intent))
        argv = intent.args["argv"]
        try:
            with self.store.command_lock(intent.lsn) as hold:
                ran = run_command(argv, self.wt, intent, hold, timeout)
                crash_point("after-exec")
                result = self._close_exec(intent, head, newest, ran, hold, timeout, hidden)
        except (StepFailed, NotOnRemote):
            # Closed by an abort record, or by a commit the remote does not hold yet.
            self.store.clear_command_lock(intent.lsn)
            raise
        self.store.clear_command_lock(intent.lsn)
        return result

    def _close_exec(self, intent: Intent, head: CommitId, newest: Lsn, ran: CommandResult,
                    hold: int, timeout: float | None = None,
                    hidden: secretfiles.Before | None = None) -> StepResult:
        closing = Lsn(newest + 1)  # after the intent, or after its approval
        post_tree = self.wt.snapshot(self.id, watched_paths(intent))
        problem, output = "", ""
        if not ran.ok:
            problem = ran.failure
        elif intent.check:
            result = run_check(intent.check, self.wt, intent, hold, timeout)
            if not result.ok:
                problem, output = result.failure, result.output
        crash_point("after-verify")
        pre_tree = TreeId(intent.pre[0])
        theirs, claimed = among(self.store.repo, self.id, intent, post_tree)
        if problem:
            # Other runs' committed paths are theirs: never put back; nor what
            # another run's open step may be changing (shell_among.left_to_others).
            skip = {t[0] for t in theirs}
            changed = [p for p in self.wt.changed_paths(pre_tree, post_tree) if p not in skip]
            left = left_to_others(self.store.repo, self.wt, self.id, changed, post_tree)
            changed = [p for p in changed if p not in left]
            # The abort is durable before anything is put back: its append
            # keeps the post snapshot, so every byte the restore overwrites
            # (the command's, or a person's made meanwhile) can be brought back.
            plan, moved = restore_plan(self.wt, post_tree, changed)
            # Secret-looking files are in neither tree: named, and put back
            # from memory only when watched (worktree/secretfiles.py).
            back_secret, note = secretfiles.plan_rollback(self.wt, hidden)
            self._close(head, Abort(
                self.id, closing, intent.lsn, problem + note, (*plan, *back_secret), output,
                saved=((".", post_tree),) if plan else (), theirs=theirs, claimed=claimed,
            ), [Ref(post_tree, is_tree=True)])
            undo = restore_tree(self.wt, pre_tree, post_tree, plan, f"r{intent.lsn}")
            back = ""
            if undo.restored:
                cmd = bring_back_tree(post_tree, undo.restored)
                back = f"; the command's changes are kept: `{cmd}` brings them back"
            back += secretfiles.rollback(self.wt, hidden, back_secret, self.id, intent.lsn)
            raise StepFailed(
                f"LSN {intent.lsn} exec aborted: {problem}; "
                f"{len(undo.restored)} changed path(s) restored"
                + left_note((*moved, *undo.kept)) + back + note
                + "".join(f"; left {p} ({why})" for p, why in sorted(left.items())),
                "fix the cause and run the step again",
            )
        verified = "exit 0" + (f" && check ok: {intent.check}" if intent.check else "")
        self._close(head, Commit(self.id, closing, intent.lsn, (post_tree,), verified,
                                 theirs=theirs, claimed=claimed),
                    [Ref(post_tree, is_tree=True)])
        return StepResult(intent.lsn, "exec", intent.target, "committed", (post_tree,))
