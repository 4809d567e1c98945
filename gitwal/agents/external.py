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
this module never restores a path: the agent owns its effects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pygit2

from ..base.crashpoints import crash_point
from ..base.errors import ToolRefused, UnknownRun
from ..base.ids import ABSENT, UNKNOWN, CommitId, Lsn, TreeId
from ..log.store import Ref, Store
from ..records.model import (
    AGENT_ARG,
    MISS,
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    UNPREDICTED,
    Abort,
    Commit,
    Intent,
    Record,
    agent_tag,
    unpredicted,
)
from ..run import Run
from ..together.claims import kept_off_others
from ..together.pathlocks import Holder
from ..together.shell_among import OTHERS_ARG, among, others_now
from ..worktree import secrets
from ..worktree.snapshot import CHECK
from ..worktree.tree import MODE_TREE, blob_id
from . import approvals
from .call import Call, Outcome
from .expectation import Expectation, Staged

Content = bytes | None  # None: the path does not exist
Compute = Callable[[tuple[Content, ...]], tuple[Content, ...]]

# Seconds between looks at a step whose closing hook is awaited. Short: with
# background closing hooks the next call usually waits a few milliseconds only.
POLL = 0.005


@dataclass
class Pending:
    """The segment as read under the run lock, plus what one call appends
    (in one append, when the call's work is done)."""

    head: CommitId
    records: list[Record]
    pending: list[tuple[Record, list[Ref]]]
    # Locks a call takes under the run lock and keeps until its append is done.
    held: ExitStack = field(default_factory=ExitStack)

    @property
    def next_lsn(self) -> Lsn:
        return Lsn(self.records[-1].lsn + len(self.pending) + 1)

    def add(self, record: Record, refs: Sequence[Ref] = ()) -> None:
        self.pending.append((record, list(refs)))

    def extend(self, staged: Iterable[Staged]) -> None:
        """Add what a look at the tree (expectation.py) asked for, in its order."""
        for s in staged:
            self.add(s.record, s.refs)

    def all(self) -> list[Record]:
        return self.records + [r for r, _ in self.pending]


class External:
    """Agent steps on one run: log before the agent's effect, close after it."""

    def __init__(self, run: Run, full_check: bool = True,
                 async_close: frozenset[str] = frozenset()) -> None:
        self.run = run
        self.store = run.store
        self.wt = run.wt
        self.repo: pygit2.Repository = run.store.repo
        self.look = Expectation(run, full_check)
        # The agent's tools whose closing hook runs in the background (Claude
        # Code: file tools, `"async": true`): it may come after the next call's.
        self.async_close = async_close

    # -- the lock and the append --------------------------------------------

    @contextmanager
    def _state(self) -> Iterator[Pending]:
        with self.store.locked():
            # No live holder of the run lock can own a ref lock now.
            self.store.clear_stale_ref_lock()
            head = self.store.head()
            if head is None:
                raise UnknownRun(f"no log for run {self.run.id}")
            # The segment at the head we will append to (log/readcache.py keeps the
            # segments Chain read: a hook server reads only the appends since).
            state = Pending(head, self.store.segment(head), [])
            with state.held:
                yield state
                if state.pending:
                    refs = {(r.oid, r.is_tree): r for _, rs in state.pending for r in rs}
                    self.store.append([r for r, _ in state.pending],
                                      sorted(refs.values(), key=lambda r: r.oid), head)

    # -- the log's expectation -------------------------------------------------

    def _notice(self, state: Pending, noticed: str, paths: Sequence[str] = (),
                snapshot: TreeId | None = None) -> None:
        """Add an ``unlogged`` record of whatever differs from the expectation."""
        state.extend(self.look.notice(state.all(), noticed, paths, snapshot))

    def _open(self, records: list[Record]) -> Intent | None:
        last = records[-1]
        return last if isinstance(last, Intent) else None

    def _make_way(self, state: Pending, call: Call, event: str, wait: float) -> None:
        """Close an open intent of another call before this call logs its own.

        Calls of one thread run one at a time (an agent runs its writing tools
        serially), so an open intent of the same thread is over: settle it. An
        open intent of another thread may still be running: give its closing
        hook ``wait`` seconds, then settle it.
        """
        open_ = self._open(state.records)
        if open_ is None:
            return
        tag = agent_tag(open_)
        if tag is not None and tag.get("call") == call.call_id:
            return
        same_thread = tag is not None and tag.get("thread") == call.thread
        if wait > 0 and (not same_thread or self.closing_may_come(open_)):
            raise _WaitFor(open_.lsn)
        what = "no closing hook came before the next call" if tag else (
            "left open by an interrupted process")
        state.extend(self.look.settle(state.all(), open_, what))

    def closing_may_come(self, intent: Intent) -> bool:
        """Whether the closing hook of an open file step is still to be expected
        although a later call of its thread has begun: its closing hook runs in
        the background and the tool did run (a target is no longer as it was).
        A step whose targets are untouched did not run: nothing will close it."""
        tag = agent_tag(intent)
        if tag is None or intent.tool == "exec" or tag.get("tool") not in self.async_close:
            return False
        return tuple(self.wt.state(p) for p in intent.target) != intent.pre

    def await_closing(self, wait: float) -> None:
        """Give an open step's background closing hook up to ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            open_ = self._open(self.store.segment())
            if open_ is None or not self.closing_may_come(open_):
                return
            time.sleep(POLL)

    def _locked(self, call: Call, event: str, wait: float,
                body: Callable[[Pending], Outcome]) -> Outcome:
        """Run ``body`` under the run lock once no other call's intent is open
        (waiting at most ``wait`` seconds for another thread's), then append
        what it added, in one append."""
        deadline = time.monotonic() + wait
        while True:
            try:
                with self._state() as state:
                    self._make_way(state, call, event,
                                   max(0.0, deadline - time.monotonic()))
                    outcome = body(state)
                return Outcome(tuple(r for r, _ in state.pending), outcome.intent,
                               outcome.note)
            except _WaitFor:
                time.sleep(POLL)  # outside the lock: the closing hook needs it

    # -- the hook events -------------------------------------------------------

    def find(self, records: list[Record], call_id: str) -> Intent | None:
        for rec in reversed(records):
            if isinstance(rec, Intent):
                tag = agent_tag(rec)
                if tag is not None and tag.get("call") == call_id:
                    return rec
        return None

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


class _WaitFor(Exception):
    """An open intent of another thread may still be running: poll again."""

    def __init__(self, lsn: Lsn) -> None:
        super().__init__(lsn)
        self.lsn = lsn


__all__ = ["External", "Pending"]


def _image(store: Store, data: bytes | None, withheld: bool) -> str:
    """A blob the append stores, or for a ``withheld`` path its id only."""
    if data is None:
        return ABSENT
    return blob_id(data) if withheld else store.put_blob(data)
