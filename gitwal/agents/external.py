"""Steps whose effect someone else applies: an agent's own tools, seen through hooks.

With ``git wal apply`` gitwal applies the effect itself, holding the run lock
from intent to commit. An agent hook cannot: the intent is logged by one
process (PreToolUse), the agent applies the effect, and a later process
(PostToolUse) closes the step. So:

* every append takes the run lock, and only for the append (never across the
  agent's effect); concurrent hook processes are serialised by it;
* an intent names the agent call it stands for (``args.agent.call``), so the
  closing process finds it by the call id, not by position;
* an intent whose closing hook never came (the call was denied, interrupted,
  or its hook failed) is *settled* by the next hook of the run, from the tree,
  without touching the tree: landed -> commit, untouched -> abort, anything
  else -> abort plus an ``unlogged`` record of what was found;
* no silent gap: whatever differs from the log's expectation when a hook
  looks (a call whose intent never became durable, an edit made while the
  hooks were not installed) is appended as an ``unlogged`` record before the
  hook's own record, naming the blobs it found so ``git gc`` keeps them.

``git wal recover`` treats these intents like any other (docs/recovery.md);
this module never restores a path: the agent owns its effects. The run lock
and the one append per call are appending.py's; the closing hook's work is
closing.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..base.errors import ToolRefused
from ..base.ids import ABSENT, UNKNOWN, TreeId
from ..log.store import Ref, Store
from ..records.model import (
    AGENT_ARG,
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Intent,
    Record,
    agent_tag,
)
from ..together.claims import kept_off_others
from ..together.pathlocks import Holder
from ..together.shell_among import OTHERS_ARG, others_now
from ..worktree import secrets
from ..worktree.snapshot import CHECK
from ..worktree.tree import MODE_TREE, blob_id
from .appending import Pending
from .call import Call, Outcome
from .closing import Closing

Content = bytes | None  # None: the path does not exist
Compute = Callable[[tuple[Content, ...]], tuple[Content, ...]]


class External(Closing):
    """Agent steps on one run: log before the agent's effect, close after it."""

    # -- the hook events -------------------------------------------------------

    def _open_for(self, records: list[Record], call: Call) -> Intent | None:
        """The call's intent if it is the open one (a hook run twice); an agent
        whose call ids repeat (Gemini: derived from the input) gets a new one."""
        open_ = self._open(records)
        tag = agent_tag(open_) if open_ is not None else None
        return open_ if tag is not None and tag.get("call") == call.call_id else None

    def intend_files(self, call: Call, paths: Sequence[str], compute: Compute,
                     event: str = "PreToolUse", wait: float = 5.0) -> Outcome:
        """Log one intent for a call that sets ``paths`` to ``compute(pre-images)``.

        ``compute`` runs under the run lock on the pre-images logged, and
        raises :class:`ToolRefused` when it cannot say what the call will
        write (the agent's tool may still succeed: its matching can be looser
        than gitwal's copy of it, or a newer version's). The intent is logged
        all the same, with the post ``unknown`` (docs/format.md): a change
        never happens before its intent, and the closing hook, or recovery,
        decides it by hash.
        """
        if len(set(paths)) != len(paths) or not paths:
            raise ToolRefused(f"{call.tool}: expected distinct paths, got {list(paths)}")

        def body(state: Pending) -> Outcome:
            already = self._open_for(state.records, call)
            if already is not None:  # a retried hook: the intent is durable already
                return Outcome((), already)
            self._keep_off_others(state, call, paths)
            self._notice(state, call.who(event), paths)
            pre_data: list[Content] = []
            modes: list[int] = []
            for p in paths:
                data, mode = self.wt.read(p)
                pre_data.append(data)
                modes.append(mode)
            unpredicted = ""
            try:
                post_data = compute(tuple(pre_data))
            except ToolRefused as e:
                unpredicted = e.message
            # An untracked secret-looking target's images are hashes only
            # (docs/security.md "Secrets"): no append keeps its bytes.
            withheld = secrets.withheld(self.repo, self.wt.root, paths)
            pre_ids = [_image(self.store, d, p in withheld)
                       for p, d in zip(paths, pre_data, strict=True)]
            post_ids = ([UNKNOWN] * len(paths) if unpredicted else
                        [_image(self.store, d, p in withheld)
                         for p, d in zip(paths, post_data, strict=True)])
            lsn = state.next_lsn
            tool, args = self._file_args(call, list(paths), post_ids)
            intent = Intent(
                run=self.run.id, lsn=lsn, tool=tool, args=args, target=tuple(paths),
                pre=tuple(pre_ids), post=tuple(post_ids), mode=tuple(modes),
                replay=REPLAY_UNSAFE if unpredicted else REPLAY_SAFE,
                key=f"{self.run.id}:{lsn}", withheld=withheld,
            )
            kept = {o for p, pre, post in zip(paths, pre_ids, post_ids, strict=True)
                    if p not in withheld for o in (pre, post)}
            state.add(intent, [Ref(o) for o in sorted(kept - {ABSENT, UNKNOWN})])
            note = f"post-image not predicted ({unpredicted})" if unpredicted else ""
            return Outcome((), intent, note)

        return self._locked(call, event, wait, body)

    def _keep_off_others(self, state: Pending, call: Call, paths: Sequence[str]) -> None:
        """Refuse (:class:`PathBusy`, nothing appended) a call on a path another
        run is changing: its step holds the path lock, or its open intent names
        the path (an agent's step spans two hooks: no lock can span it, so the
        open intent is the mark). The path locks are kept until this call's
        intent is appended, so two runs' hooks never both pass this check."""
        task = self.store.plan(state.records[0]).task  # O(1): the segment's first record
        holder = Holder(self.run.id, state.next_lsn, call.tool, task)
        state.held.enter_context(kept_off_others(self.repo, holder, paths))

    def _file_args(self, call: Call, paths: list[str],
                   post_ids: list[str]) -> tuple[str, dict[str, Any]]:
        if len(paths) == 1 and post_ids[0] not in (ABSENT, UNKNOWN):
            # An end state: `recover --redo` and `verify` treat it as write_file.
            return "write_file", {"path": paths[0], "content": post_ids[0],
                                  AGENT_ARG: call.tag()}
        return "write_files", {"paths": paths, "contents": post_ids, AGENT_ARG: call.tag()}

    def intend_exec(self, call: Call, argv: Sequence[str], cwd: str | None = None,
                    event: str = "PreToolUse", wait: float = 5.0,
                    irreversible: bool = False) -> Outcome:
        """Log an exec intent (the whole tree as its pre-image) for a shell call;
        ``irreversible``: one the user approves in the agent's own prompt
        (agents/approvals.py), recorded when the call closes."""

        def body(state: Pending) -> Outcome:
            already = self._open_for(state.records, call)
            if already is not None:
                return Outcome((), already)
            # Read before the snapshot: what other runs commit from here on is
            # either in the pre tree or found at the closing (shell_among.py).
            others = others_now(self.repo, self.run.id)
            snap = self.wt.snapshot(self.run.id)
            self._notice(state, call.who(event), snapshot=snap)
            lsn = state.next_lsn
            args: dict[str, Any] = {"argv": list(argv), AGENT_ARG: call.tag()}
            if others:
                args[OTHERS_ARG] = others
            if cwd is not None:
                args["cwd"] = cwd
            if irreversible:
                args["irreversible"] = True
            intent = Intent(
                run=self.run.id, lsn=lsn, tool="exec", args=args, target=(".",),
                pre=(snap,), post=None, mode=(MODE_TREE,), replay=REPLAY_UNSAFE,
                key=f"{self.run.id}:{lsn}",
            )
            state.add(intent, [Ref(snap, is_tree=True)])
            return Outcome((), intent)

        return self._locked(call, event, wait, body)

    def settle(self, event: str, wait: float = 0.0, keep_in_doubt: bool = False) -> Outcome:
        """Close an intent left open, and record what differs (a hook's check-up).

        ``keep_in_doubt``: an open shell call that changed the tree is in doubt
        (it may still be running, or may not have finished): leave it open for a
        decision (``git wal recover``) or for the next tool call to settle.
        """
        if keep_in_doubt:
            with self._state() as state:
                open_ = self._open(state.records)
                if open_ is not None and open_.tool == "exec" and self.wt.changed_paths(
                        TreeId(open_.pre[0]), self.wt.snapshot(self.run.id)):
                    return Outcome((), open_, f"LSN {open_.lsn} is in doubt: left open")
        call = Call("gitwal", event, "", "settle")  # matches no intent, no thread

        def body(state: Pending) -> Outcome:
            self._notice(state, f"{event} check")
            return Outcome(())

        return self._locked(call, event, wait, body)

    def check(self, noticed: str) -> Outcome:
        """Compare the whole tree with the expectation, unless an intent is open
        (its agent may be writing its targets right now): a background check."""
        with self._state() as state:
            if self._open(state.records) is None:
                self._notice(state, noticed, snapshot=self.wt.snapshot(self.run.id))
            pending = tuple(r for r, _ in state.pending)
        return Outcome(pending)


    def check_quietly(self, noticed: str) -> Outcome:
        """As :meth:`check`, with the whole tree read before the run lock is
        taken, so a call arriving meanwhile never waits for that read. The
        look is kept only when nothing was appended since it began (else the
        calls that came look at what they change; the next check looks again),
        and only one such check runs at a time."""
        head = self.store.head()
        if head is None or self._open(self.store.segment(head)) is not None:
            return Outcome(())
        with self.wt.scratch_lock(self.run.id, CHECK) as mine:
            if not mine:
                return Outcome(())  # another check is reading the tree
            snap = self.wt.snapshot(self.run.id, scratch=CHECK)
        with self._state() as state:
            if state.head != head:
                return Outcome(())
            self._notice(state, noticed, snapshot=snap)
            pending = tuple(r for r, _ in state.pending)
        return Outcome(pending)


__all__ = ["External"]


def _image(store: Store, data: bytes | None, withheld: bool) -> str:
    """A blob the append stores, or for a ``withheld`` path its id only."""
    if data is None:
        return ABSENT
    return blob_id(data) if withheld else store.put_blob(data)
