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

Here: the file steps. A shell step (exec) keeps the same protocol with trees
for images (shell_steps.py); the gate in front of every append, and reading
the log back, are run_log.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .base.crashpoints import crash_point
from .base.errors import StepFailed, ToolRefused
from .base.ids import ABSENT, CommitId, Lsn
from .changes import tools
from .changes.commands import command_timeout, run_check
from .changes.effects import apply_post, restore_pre
from .changes.effects import observed as observed_states
from .changes.tools import RESTORING_TOOLS
from .log.authorship import attach
from .log.store import Ref
from .records.model import REPLAY_SAFE, Abort, Commit, Intent
from .shell_steps import ShellSteps
from .steps_api import StepResult as StepResult  # re-exported: callers import it from here
from .steps_api import ToolSteps
from .together.claims import kept_off_others
from .together.pathlocks import Holder
from .worktree import secrets
from .worktree.overwrite import describe, left_note
from .worktree.tree import blob_id


class Run(ToolSteps, ShellSteps):
    """One agent task's log and the steps that append to it: file steps here,
    shell steps (``run.exec(...)``) in shell_steps.py, the typed per-tool
    methods (``run.write_file(...)`` and the like) in steps_api.py; the log
    read back, and the gate before each append, in run_log.py."""

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
        commit = Commit(self.id, Lsn(intent.lsn + 1), intent.lsn, observed, verified)
        if self.group_commit:
            # Re-derivable after a crash (every target hashes to post), so it
            # may wait for the next append (docs/format.md, "Group commit").
            self.store.defer([commit], [], head)
            return StepResult(intent.lsn, intent.tool, intent.target, "committed", observed,
                              durable=False)
        self._close(head, commit)
        return StepResult(intent.lsn, intent.tool, intent.target, "committed", observed)
