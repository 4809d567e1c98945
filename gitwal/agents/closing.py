"""Closing an agent's step after its effect: the commit of what the targets
hold now, or, for a failed call, the abort and an ``unlogged`` record of
whatever it changed all the same. The agent applied the effect: nothing here
writes the tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base.crashpoints import crash_point
from ..base.ids import TreeId
from ..log.store import Ref
from ..records.model import (
    MISS,
    UNPREDICTED,
    Abort,
    Commit,
    Intent,
    Record,
    agent_tag,
    unpredicted,
)
from ..together.shell_among import among
from . import approvals
from .appending import Appender, Pending
from .call import Call, Outcome


class Closing(Appender):
    """The closing hook of an agent's call (PostToolUse and its kin)."""

    def find(self, records: list[Record], call_id: str) -> Intent | None:
        for rec in reversed(records):
            if isinstance(rec, Intent):
                tag = agent_tag(rec)
                if tag is not None and tag.get("call") == call_id:
                    return rec
        return None

    def close(self, call: Call, event: str = "PostToolUse", paths: Sequence[str] = (),
              error: str | None = None, outcome: str = "tool succeeded") -> Outcome:
        """Close the call's intent after the agent's effect (``error``: it failed;
        ``outcome``: how a shell call ended, in the commit's words).

        A call with no open intent (none was durable, or it was settled
        already) has its ``paths`` (or, for a shell call, the tree) compared
        with the expectation instead: the difference becomes ``unlogged``.
        """
        # Until here the step is in flight for every other run: its intent is the
        # newest record, its tool has run (a test holds a step here).
        crash_point("before-close")
        with self._state() as state:
            intent = self.find(state.records, call.call_id)
            open_ = self._open(state.records)
            is_open = intent is not None and open_ is not None and open_.lsn == intent.lsn
            if intent is None or not is_open:
                why = "its intent was closed before the tool finished" if intent else (
                    "no durable intent")
                snap = None
                if not paths:
                    snap = self.wt.snapshot(self.run.id)
                self._notice(state, f"{call.who(event)} ({why})", paths, snapshot=snap)
                pending = tuple(r for r, _ in state.pending)
                return Outcome(pending, intent)
            assert intent is not None
            if intent.args.get("irreversible") is True:
                # It ran, so the user allowed it in the agent's permission prompt.
                state.add(approvals.answered(self.run, state.next_lsn, intent))
            if error is not None:
                self._close_failed(state, call, event, intent, error)
            elif intent.tool == "exec":
                snap = self.wt.snapshot(self.run.id)
                theirs, claimed = among(self.repo, self.run.id, intent, snap)
                state.add(Commit(self.run.id, state.next_lsn, intent.lsn, (snap,),
                                 f"{outcome} ({call.who(event)})", theirs=theirs,
                                 claimed=claimed),
                          [Ref(snap, is_tree=True)])
            else:
                self._close_file(state, call, event, intent)
            pending = tuple(r for r, _ in state.pending)
        # Under wal.remote.durability commit the step is committed once the
        # remote holds its commit (docs/remote-runs.md): else NotOnRemote, which
        # the engine tells the model; the step stays committed here.
        if self.store.replica is not None and any(isinstance(r, Commit) for r in pending):
            head = self.store.head()
            if head is not None:
                self.store.replica.hold(self.run.id, head, f"LSN {intent.lsn}")
        return Outcome(pending, intent)

    def _close_file(self, state: Pending, call: Call, event: str, intent: Intent) -> None:
        assert intent.post is not None
        observed: list[str] = []
        refs: list[Ref] = []
        for path, want in zip(intent.target, intent.post, strict=True):
            have, rs = self.look.peek(path, want, store=path not in intent.withheld)
            observed.append(have)
            refs += rs
        if tuple(observed) == intent.post:
            verified = f"hash==post ({call.who(event)})"
        elif unpredicted(intent):  # every target unknown: nothing to compare with
            verified = f"{UNPREDICTED}: recorded as observed ({call.who(event)})"
        else:
            differ = [p for p, a, b in zip(intent.target, observed, intent.post, strict=True)
                      if a != b]
            verified = (f"{MISS}: {', '.join(differ)} differ from the predicted post-image; "
                        f"recorded as observed ({call.who(event)})")
        self.wt.settle(intent.target)  # the agent wrote them; it need not have fsynced
        state.add(Commit(self.run.id, state.next_lsn, intent.lsn, tuple(observed), verified),
                  refs)

    def _close_failed(self, state: Pending, call: Call, event: str, intent: Intent,
                      error: str) -> None:
        reason = f"{call.who(event)}: {error.strip()[-300:] or 'the tool failed'}"
        if intent.tool == "exec":
            snap = self.wt.snapshot(self.run.id)
            theirs, claimed = among(self.repo, self.run.id, intent, snap)
            skip = {t[0] for t in theirs}
            changed = [p for p in self.wt.changed_paths(TreeId(intent.pre[0]), snap)
                       if p not in skip]
            state.add(Abort(self.run.id, state.next_lsn, intent.lsn,
                            reason + (f"; {len(changed)} path(s) changed, left as found "
                                      "and recorded as unlogged" if changed else ""),
                            theirs=theirs, claimed=claimed),
                      [Ref(snap, is_tree=True)])
            if changed:
                self._notice(state, f"{call.who(event)} (changes of the failed call)",
                             snapshot=snap)
            return
        now = tuple(self.wt.state(p) for p in intent.target)
        found = ("untouched" if now == intent.pre else "the post-image"
                 if now == intent.post else "changed, left as found")
        state.add(Abort(self.run.id, state.next_lsn, intent.lsn, f"{reason}; found {found}"))
        if now != intent.pre:
            self._notice(state, f"{call.who(event)} (changes of the failed call)",
                         intent.target)


__all__ = ["Closing"]
