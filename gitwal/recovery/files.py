"""Recovery's decisions for file tools: whose bytes each target holds (the
step's own pre, post or torn post; another run's committed change; someone
else's), and what follows from it, per the table in recovery.py
(docs/recovery.md is the normative copy). Bytes gitwal did not write are
never overwritten on its own authority: in doubt, and ``--restore`` saves
them in the log before it puts the pre-image back.
"""

from __future__ import annotations

from ..base.crashpoints import crash_point
from ..changes.commands import run_check
from ..changes.effects import apply_post, missing_images, observed, restore_pre
from ..changes.tools import RESTORING_TOOLS
from ..log.store import Ref
from ..records.model import REPLAY_SAFE, Abort, Commit, Intent, unpredicted
from ..worktree.overwrite import (
    DIRECTORY,
    SPECIAL,
    Kept,
    Saved,
    describe,
    found,
    save,
    torn_prefix,
)
from .elsewhere import Elsewhere, landed_for
from .host import DecisionHost
from .report import APPLIED, IN_DOUBT, NOT_APPLIED, SUPERSEDED, TORN, Outcome

# Whose bytes a target holds (FileDecisions._kind).
PRE, POST, TORN_POST, FOREIGN = "pre", "post", "torn-post", "foreign"
OTHER_RUN = "other-run "


class FileDecisions(DecisionHost):
    """Mixed into :class:`gitwal.recovery.decide.Recovery` (see host.py)."""

    def _decide_file(self, intent: Intent, dry_run: bool) -> Outcome:
        assert intent.post is not None
        now = (observed(self.wt, intent) if intent.tool in RESTORING_TOOLS
               else tuple(found(self.wt, p) for p in intent.target))
        if now == intent.post:
            if dry_run:
                return self._outcome(intent, APPLIED, "none", "applied; commit is missing")
            if intent.tool in RESTORING_TOOLS:
                apply_post(self.wt, intent)  # the contents are there; the modes may not be
            return self._commit_found(intent, APPLIED, "applied; commit was missing",
                                      "committed")
        # Another run's committed step began from this step's post-image: it
        # landed (that run read it). Redoing or restoring it would undo that
        # run's work, so it is committed, the tree left as it is.
        landed = landed_for(intent, self.intent_at.get(intent.lsn, 0), self._steps_elsewhere())
        if landed and all(state == post or p in landed for p, state, post
                          in zip(intent.target, now, intent.post, strict=True)):
            return self._landed_elsewhere(intent, landed, dry_run)
        kinds = [OTHER_RUN + f"by run {landed[p].run} at LSN {landed[p].lsn}"
                 if p in landed else self._kind(intent, i, state)
                 for i, (p, state) in enumerate(zip(intent.target, now, strict=True))]
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
        if self.redo and intent.withheld:
            detail += (f"; not redone: the log keeps only hashes of {', '.join(intent.withheld)}"
                       " (a secret-looking file), so it cannot write its post-image")
        elif self.redo and intent.replay == REPLAY_SAFE and not others:
            kept = apply_post(self.wt, intent)
            if not kept:
                return self._commit_found(intent, outcome, detail + "; redone", "redone")
            restored += restore_pre(self.wt, intent).restored
            detail += f"; not redone: {describe(kept)} changed meanwhile"
        self._append(Abort(self.store.run, self.next_lsn, intent.lsn,
                           f"recovery: {detail}; not redone", restored))
        return self._outcome(intent, outcome, "aborted",
                             detail + ("" if others else "; redo it"))

    def _landed_elsewhere(self, intent: Intent, landed: dict[str, Elsewhere],
                          dry_run: bool) -> Outcome:
        assert intent.post is not None
        seen = "; ".join(f"run {s.run} LSN {s.lsn} began from its post-image of {p}"
                         for p, s in sorted(landed.items()))
        detail = f"applied: {seen} (left as it is)"
        if intent.check:
            detail += "; its check was not run again (the tree has moved on since)"
        if dry_run:
            return self._outcome(intent, APPLIED, "none", detail)
        self._append(Commit(self.store.run, self.next_lsn, intent.lsn, intent.post,
                            f"post read by another run: {seen}", recovered=True))
        return self._outcome(intent, APPLIED, "committed", detail + "; now committed")

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

    def _decide_foreign(self, intent: Intent, now: tuple[str, ...],
                        foreign: tuple[str, ...], dry_run: bool) -> Outcome:
        """A target holds bytes gitwal did not write (a person's edit, a delete,
        ``git reset --hard``): never overwritten on gitwal's own authority. In
        doubt; ``--restore`` first saves them in the log, then restores."""
        shown = describe(Kept(p, s) for p, s in zip(intent.target, now, strict=True)
                         if p in foreign)
        detail = f"in doubt: {shown}"
        if unpredicted(intent):
            # Its post was not predicted: the agent's tool may have written it
            # whole, or died half-way; only a person can tell.
            detail += (" (the agent's tool may have written it: its post-image was not "
                       "predicted, so gitwal cannot tell a finished write from a torn one)")
        if dry_run or not self.restore:
            return self._outcome(intent, IN_DOUBT, "none" if dry_run else "left-open", detail,
                                 foreign, True)
        if (missing := missing_images(self.store.repo, intent)):
            return self._missing(intent, missing)
        if secret := [p for p in foreign if p in intent.withheld]:
            # Saving what it holds would put a secret's bytes into the log.
            return self._outcome(intent, IN_DOUBT, "left-open",
                                 detail + f"; --restore does not store {', '.join(secret)} "
                                 "(a secret-looking file) in the log: move it away, or "
                                 "`git wal resolve`", foreign, True)
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
        secret = [p for p in paths if p in intent.withheld]
        if secret:
            why = (f"not restorable: the log keeps only the hash of {', '.join(secret)}'s "
                   "pre-image (a secret-looking file, docs/security.md)")
        else:
            why = (f"the pre-image of {', '.join(paths)} is not in the object database "
                   "(pruned, or the log names an object it never stored)")
        return self._outcome(intent, IN_DOUBT, "left-open",
                             f"in doubt: {why}; nothing was restored", tuple(paths), True)

    def _commit_found(
        self, intent: Intent, outcome: str, detail: str, action: str
    ) -> Outcome:
        """Verify an intent whose post-image is on disk, then commit (or abort)."""
        assert intent.post is not None
        seen = (observed(self.wt, intent) if intent.tool in RESTORING_TOOLS
                else tuple(found(self.wt, p) for p in intent.target))
        ok = seen == intent.post
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
        # The post-image is in place, but the killed writer may not have
        # fsynced its directory (or the file, when an agent wrote it).
        self.wt.settle(intent.target)
        self._append(Commit(self.store.run, self.next_lsn, intent.lsn, seen,
                            verified, recovered=True))
        return self._outcome(intent, outcome, action, detail + "; now committed")
