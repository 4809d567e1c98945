"""The step protocol: intent -> apply -> verify -> commit | abort.

Invariants (docs/recovery.md relies on them):

* the intent is durable before the target is touched;
* a commit record is written only after every target hashed to its post-image
  and the check (if any) exited 0;
* one gitwal process at a time works on a run (an advisory lock held for the
  whole step), so at most one intent is open, and it is the newest record;
* one step at a time, of any run, writes a path: a file step holds its
  targets' path locks (together/pathlocks.py) from reading the pre-images to its
  closing record, and is refused before its intent while another run holds
  one, or has an open agent intent on one (together/open_intents.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .base.crashpoints import crash_point
from .base.errors import NeedsApproval, RunBusy, StepFailed, ToolRefused
from .base.ids import ABSENT, CommitId, Lsn, RunId, TreeId
from .changes import tools
from .changes.commands import CommandResult, command_timeout, run_check, run_command
from .changes.effects import apply_post, restore_pre
from .changes.effects import observed as observed_states
from .changes.tools import RESTORING_TOOLS
from .log.authorship import attach
from .log.store import Ref, Store
from .records.model import (
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Abort,
    Approval,
    Commit,
    Intent,
    Record,
    agent_tag,
)
from .steps_api import StepResult as StepResult  # re-exported: callers import it from here
from .steps_api import ToolSteps
from .together.claims import kept_off_others
from .together.pathlocks import Holder
from .together.shell_among import OTHERS_ARG, among, left_to_others, others_now
from .trust.authority import may_act
from .worktree import secretfiles, secrets
from .worktree.overwrite import bring_back_tree, describe, left_note, restore_plan, restore_tree
from .worktree.snapshot import watched_paths
from .worktree.tree import MODE_TREE, Worktree, blob_id


class Run(ToolSteps):
    """One agent task's log and the steps that append to it (the typed
    per-tool methods, ``run.write_file(...)`` and the like: steps_api.py)."""

    def __init__(self, store: Store, wt: Worktree) -> None:
        self.store = store
        self.wt = wt
        self.id: RunId = store.run
        self.ref_name = store.ref_name

    def records(self) -> list[Record]:
        """The whole log, validated as a chain."""
        return self.store.records()

    def stream(self) -> Iterator[tuple[Record, bytes]]:
        """The whole log with each record's canonical bytes, oldest first, one
        record at a time (memory flat in the log's length; checks as read)."""
        return self.store.stream()

    def since_checkpoint(self) -> list[Record]:
        """The records from the newest checkpoint on (the whole log without one)."""
        return self.store.segment()

    def recent(self, appends: int = 1) -> list[Record]:
        """The records of the newest ``appends`` appends, oldest first (fewer
        when the log holds fewer appends)."""
        out: list[Record] = []
        head = self.store.head()
        for _ in range(appends):
            if head is None:
                break
            out[:0] = self.store.head_records(head)
            head = self.store.parent(head)
        return out

    # -- appends -----------------------------------------------------------

    def _next(self) -> tuple[CommitId, Lsn]:
        """Head and next LSN; refuses while the newest record is an open intent."""
        head = self.store.head()
        if head is None:
            raise RunBusy(f"run {self.id} has no log")
        last = self.store.head_records(head)[-1]
        if isinstance(last, Approval) and not may_act(self.store.repo, last, head):
            raise StepFailed(
                f"run {self.id}: intent LSN {last.intent} is an irreversible step waiting for "
                f"a person's approval (approval LSN {last.lsn} was not written in this clone "
                "nor signed by a key you trust: it is data here)",
                f"ask the user to run `git wal approve {last.intent} --run {self.id}`, or drop "
                f"the step: `git wal resolve {last.intent} --run {self.id} --not-applied`")
        if isinstance(last, Approval):
            raise StepFailed(
                f"run {self.id}: intent LSN {last.intent} is approved and waits to run",
                "run the same command again (`git wal exec --irreversible -- ...`), or "
                f"`git wal recover --run {self.id} --redo`")
        if isinstance(last, Intent) and last.args.get("irreversible") is True \
                and agent_tag(last) is None:
            raise StepFailed(
                f"run {self.id}: intent LSN {last.lsn} (exec "
                f"{shlex.join(last.args.get('argv') or [])}) is an irreversible step waiting "
                "for a person's approval",
                f"ask the user to run `git wal approve {last.lsn} --run {self.id}` and then "
                f"run it (`git wal recover --run {self.id} --redo`), or drop it: `git wal "
                f"resolve {last.lsn} --run {self.id} --not-applied`")
        if isinstance(last, Intent):
            raise StepFailed(
                f"run {self.id}: intent LSN {last.lsn} ({last.tool} "
                f"{' '.join(last.target)}) is still open after an interruption",
                f"run `git wal recover --run {self.id}` first",
            )
        return head, Lsn(last.lsn + 1)

    def next_record(self) -> tuple[CommitId, Lsn]:
        """Head and next LSN for a record that is not a step (a claim): refused
        while an intent is open, as for a step. The caller holds the run lock."""
        return self._next()

    def _close(self, head: CommitId, record: Record, refs: Sequence[Ref] = ()) -> CommitId:
        """Append the commit or abort record that closes the open intent."""
        return self.store.append([record], refs, head)

    # -- file tools --------------------------------------------------------

    def apply(
        self, tool: str, check: str | None = None, step: int | None = None,
        timeout: float | None = None, **args: Any
    ) -> StepResult:
        """Run one end-state tool as a logged step; raises StepFailed on abort.

        ``timeout``: seconds the check may run (default: wal.commandTimeout)."""
        spec = tools.get(tool)
        tools.check_args(spec, args)  # a misspelt keyword is named, with the right ones
        timeout = command_timeout(self.wt, timeout)  # a bad setting fails before the intent
        for name in spec.path_args:
            if not isinstance(args.get(name), str):
                raise ToolRefused(f"{tool}: argument {name!r} must be a path")
        with self.store.locked():
            # Confined under the lock, right before use; the reads and writes
            # below refuse a symlinked component again at the moment they act.
            paths = []
            for name in spec.path_args:
                args[name] = self.wt.confine(args[name])
                paths.append(args[name])
            if len(set(paths)) != len(paths):
                raise ToolRefused(f"{tool}: the same path is named twice")
            with self.paths_locked(tool, paths):
                pre_content = []
                pre_modes = []
                for p in paths:
                    data, mode = self.wt.read(p)
                    pre_content.append(data)
                    pre_modes.append(mode)
                post_content = spec.apply(tuple(pre_content), args)
                withheld = secrets.withheld(self.wt.repo, self.wt.root, paths)
                post_ids = [self._image(data, p in withheld)
                            for p, data in zip(paths, post_content, strict=True)]
                logged = dict(args)
                if tool == "write_file":
                    # The content is the post-image blob; the record names it.
                    logged["content"] = post_ids[0]
                elif withheld:
                    # A line or text typed for a secret-looking file is as secret as
                    # its bytes: the record keeps its id only (docs/format.md).
                    logged.update({name: f"withheld {blob_id(value.encode())}"
                                   for name in spec.other_args
                                   if isinstance(value := args[name], str)})
                return self.step(tool, logged, paths, pre_content, pre_modes, post_ids,
                                 check, step, timeout)

    @contextmanager
    def paths_locked(self, tool: str, paths: Sequence[str]) -> Iterator[None]:
        """Hold ``paths`` against every other run's step (the caller holds the
        run lock), from reading the pre-images to the closing record; refused
        (:class:`PathBusy`, nothing logged) when another run's step, or an open
        agent intent of another run, is on one of them."""
        head, lsn = self._next()  # refuses an open intent of this run first
        task = self.store.root_plan(head).task  # cached: Wal.run read it already
        with kept_off_others(self.store.repo, Holder(self.id, lsn, tool, task), paths):
            yield

    def step(self, tool: str, args: dict[str, Any], paths: Sequence[str],
             pre_content: Sequence[bytes | None], pre_modes: Sequence[int],
             post_ids: Sequence[str], check: str | None = None, step: int | None = None,
             timeout: float | None = None) -> StepResult:
        """Log an intent to turn ``paths`` from ``pre_content`` (read under the run
        lock, which the caller holds) into the blobs ``post_ids``, write them,
        verify, and commit (or abort and put back what was written).

        The pre-images are stored and named by the append: whatever the paths
        held stays recoverable (``undo --force`` relies on it). Except on
        untracked secret-looking paths (secrets.withheld): their images are
        ids only, the intent says so (``withheld``), and no append keeps
        their bytes; an undo or redo of such a path is refused up front."""
        head, lsn = self._next()
        withheld = secrets.withheld(self.wt.repo, self.wt.root, paths)
        if withheld and tool in RESTORING_TOOLS:
            raise ToolRefused(
                f"{tool}: {', '.join(withheld)} is a secret-looking file git does not track: "
                "the log keeps only hashes of its contents, so gitwal cannot put it back; "
                f"nothing was {tool}ne",
                "edit it yourself, or leave it out: `git wal undo LSN...` names the steps "
                "(docs/undo.md)")
        pre_ids = [self._image(data, p in withheld)
                   for p, data in zip(paths, pre_content, strict=True)]
        kept = {o for p, pre, post in zip(paths, pre_ids, post_ids, strict=True)
                if p not in withheld for o in (pre, post)}
        refs = [Ref(oid) for oid in sorted(kept - {ABSENT})]
        # attach: the record as Store.append writes it, with its proof that
        # this clone wrote the check (commands.run_check runs no other).
        intent = attach(self.store.repo, Intent(
            run=self.id, lsn=lsn, tool=tool, args=args, target=tuple(paths),
            pre=tuple(pre_ids), post=tuple(post_ids), mode=tuple(pre_modes),
            replay=REPLAY_SAFE, key=f"{self.id}:{lsn}", check=check, step=step,
            withheld=tuple(p for p in paths if p in withheld),
        ))
        head = self.store.append([intent], refs, head)
        crash_point("after-intent")
        try:
            changed = apply_post(self.wt, intent)
        except OSError as e:
            # The intent is durable: close it, so the log never keeps an
            # intent open that no crash explains.
            undo = restore_pre(self.wt, intent)
            self._close(head, Abort(
                self.id, Lsn(intent.lsn + 1), intent.lsn,
                f"write failed: {e}" + left_note(undo.kept), undo.restored,
            ))
            raise StepFailed(f"LSN {intent.lsn} {tool} aborted: could not write: {e}"
                             + left_note(undo.kept),
                             "check permissions and free space, then apply it again") from e
        if changed:
            # Someone wrote a target between our read and our write: theirs.
            undo = restore_pre(self.wt, intent)
            why = f"{describe(changed)} changed while the step ran"
            self._close(head, Abort(self.id, Lsn(intent.lsn + 1), intent.lsn,
                                    why + left_note(undo.kept), undo.restored))
            raise StepFailed(f"LSN {intent.lsn} {tool} aborted: {why}; nothing of "
                             "theirs was overwritten", "read the file again and retry")
        crash_point("after-apply")
        return self._verify_and_close(intent, head, timeout)

    def _image(self, data: bytes | None, withheld: bool) -> str:
        """The id a record names for ``data``: a blob the next append stores,
        or, ``withheld``, a hash whose bytes only this process holds."""
        if data is None:
            return ABSENT
        if not withheld:
            return self.store.put_blob(data)
        oid = blob_id(data)
        self.wt.held[oid] = data
        return oid

    def _verify_and_close(self, intent: Intent, head: CommitId,
                          timeout: float | None = None) -> StepResult:
        assert intent.post is not None
        observed = observed_states(self.wt, intent)
        problem = ""
        output = ""
        if observed != intent.post:
            problem = "post-image hash mismatch after write"
        elif intent.check:
            result = run_check(intent.check, self.wt, intent, timeout=timeout)
            if not result.ok:
                problem, output = result.failure, result.output
        crash_point("after-verify")
        if problem:
            # Only what this step wrote goes back: a path someone changed
            # while the check ran keeps their bytes (and is named).
            undo = restore_pre(self.wt, intent)
            self._close(head, Abort(
                self.id, Lsn(intent.lsn + 1), intent.lsn, problem + left_note(undo.kept),
                undo.restored, output,
            ))
            raise StepFailed(
                f"LSN {intent.lsn} {intent.tool} aborted: {problem}; "
                f"{', '.join(undo.restored) or 'nothing'} restored" + left_note(undo.kept),
                (output.strip().splitlines() or [""])[-1][:200]
                or "fix the cause and apply the step again",
            )
        verified = "hash==post" + (f" && check ok: {intent.check}" if intent.check else "")
        self._close(head, Commit(
            self.id, Lsn(intent.lsn + 1), intent.lsn, observed, verified
        ))
        return StepResult(intent.lsn, intent.tool, intent.target, "committed", observed)

    # -- shell steps -------------------------------------------------------

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
        except StepFailed:
            self.store.clear_command_lock(intent.lsn)  # closed by an abort record
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
