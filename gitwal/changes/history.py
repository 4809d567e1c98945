"""What each committed step of a run changed, and which steps are in effect
(the ledger of undo and redo: docs/undo.md).

Every committed step says exactly what it changed: a file step each target's
state (and mode) before, its intent's ``pre``, and after, its commit's
``post``; a shell step every path whose state or mode differs between its pre
and post trees. A step is in effect until a committed undo names it, and
again after a committed redo of that undo. From that alone, and without
reading the working tree, this module says what an undo or a redo must give
each path back, and :func:`log_problems` checks that every undo and redo in a
log wrote exactly that (`git wal verify`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pygit2

from ..base.errors import WalError
from ..base.ids import ABSENT, Lsn
from ..records.model import EXEC_TOOL, Abort, Checkpoint, Commit, Intent, Record, agent_tag
from .tools import post_modes

__all__ = ["Change", "History", "Restore", "changes_of", "log_problems", "redo_restore",
           "tree_changes", "turns", "undo_restore"]

RESTORING = ("undo", "redo")


@dataclass(frozen=True)
class Change:
    """One path one committed intent changed."""

    path: str
    before: str  # object id, or ABSENT
    before_mode: int  # 0 when absent
    after: str


@dataclass
class History:
    """What the committed intents of a run did, oldest first."""

    steps: dict[Lsn, tuple[Intent, tuple[Change, ...]]] = field(default_factory=dict)
    live: set[Lsn] = field(default_factory=set)  # steps in effect (not undone)
    undos: dict[Lsn, tuple[Intent, tuple[Change, ...]]] = field(default_factory=dict)
    redone: set[Lsn] = field(default_factory=set)  # undos a redo took back
    # path -> (lsn, state after) of every committed intent that changed it
    touched: dict[str, list[tuple[Lsn, str]]] = field(default_factory=dict)
    checkpoint: int = 0  # the newest checkpoint covers the steps up to this LSN

    @classmethod
    def of(cls, repo: pygit2.Repository, records: Iterable[Record]) -> History:
        h = cls()
        for _ in h.replay(repo, records):
            pass
        return h

    def replay(self, repo: pygit2.Repository, records: Iterable[Record]
               ) -> Iterator[tuple[Intent, Commit]]:
        """Fold ``records`` in, oldest first; yields each committed intent (and its
        commit) just before it is folded in, so a caller sees the history as it
        was when that step was taken."""
        opened: dict[int, Intent] = {}
        for rec in records:
            if isinstance(rec, Intent):
                opened[rec.lsn] = rec
            elif isinstance(rec, Abort):
                opened.pop(rec.intent, None)
            elif isinstance(rec, Checkpoint):
                self.checkpoint = rec.covers
            elif isinstance(rec, Commit) and (intent := opened.pop(rec.intent, None)):
                yield intent, rec
                self._commit(repo, intent, rec)

    def _commit(self, repo: pygit2.Repository, intent: Intent, commit: Commit) -> None:
        changes = changes_of(repo, intent, commit)
        for c in changes:
            self.touched.setdefault(c.path, []).append((intent.lsn, c.after))
        if intent.tool == "undo":
            self.undos[intent.lsn] = (intent, changes)
            self.live -= set(intent.args.get("undoes", []))
        elif intent.tool == "redo":
            undone = self.undos.get(Lsn(intent.args.get("redoes", 0)))
            if undone is not None:
                self.redone.add(undone[0].lsn)
                self.live |= set(undone[0].args.get("undoes", []))
        else:
            self.steps[intent.lsn] = (intent, changes)
            self.live.add(intent.lsn)

    def newest_state(self, path: str) -> str | None:
        """What the newest committed intent that changed ``path`` left there."""
        seen = self.touched.get(path)
        return seen[-1][1] if seen else None


def changes_of(repo: pygit2.Repository, intent: Intent, commit: Commit) -> tuple[Change, ...]:
    """The paths a committed step changed (a shell step: every path its pre and
    post trees differ in, except those its commit names in ``theirs``: other
    runs' steps that committed them while it ran, docs/agents-together.md),
    each with its state and mode before and its state after."""
    if intent.tool == EXEC_TOOL:
        theirs = {t[0] for t in commit.theirs}
        return tuple(c for c in tree_changes(repo, intent.pre[0], commit.post[0])
                     if c.path not in theirs)
    after_modes = post_modes(intent.tool, intent.mode, intent.args)
    return tuple(Change(p, pre, mode, post) for p, pre, mode, post, after_mode
                 in zip(intent.target, intent.pre, intent.mode, commit.post, after_modes,
                        strict=False)
                 if pre != post or (post != ABSENT and mode != after_mode))


def tree_changes(repo: pygit2.Repository, old_id: str, new_id: str) -> tuple[Change, ...]:
    """Every path whose state or mode differs between two trees (none when
    either is not a tree in the object database)."""
    old, new = repo.get(old_id), repo.get(new_id)
    if not isinstance(old, pygit2.Tree) or not isinstance(new, pygit2.Tree):
        return ()
    out = []
    for delta in old.diff_to_tree(new).deltas:
        gone = delta.old_file.id == _ZERO
        made = delta.new_file.id == _ZERO
        out.append(Change(delta.new_file.path if not made else delta.old_file.path,
                          ABSENT if gone else str(delta.old_file.id),
                          0 if gone else delta.old_file.mode,
                          ABSENT if made else str(delta.new_file.id)))
    return tuple(out)


_ZERO = pygit2.Oid(hex="0" * 40)


def turns(h: History) -> list[str]:
    """The agent turns (user prompts) the run's steps answer, oldest first."""
    seen: dict[str, None] = {}
    for intent, _changes in h.steps.values():
        tag = agent_tag(intent)
        if tag is not None and isinstance(tag.get("turn"), str):
            seen.setdefault(tag["turn"], None)
    return list(seen)


Restore = dict[str, tuple[str, int]]  # path -> (state, git mode) it is given back


def undo_restore(h: History, chosen: set[Lsn]) -> Restore:
    """What undoing the steps ``chosen`` (all in effect) gives each path back:
    its state before the earliest of them; refused when a step left in place
    changed the path later."""
    wrong = sorted(n for n in chosen if n not in h.live)
    if wrong:
        raise WalError(f"LSN {wrong[0]} is not a step in effect", "`git wal log` lists them")
    restore: dict[str, tuple[str, int, Lsn]] = {}
    for n in sorted(chosen):
        for c in h.steps[n][1]:
            restore.setdefault(c.path, (c.before, c.before_mode, n))
    for path, (_state, _mode, first) in restore.items():
        later = [n for n, _after in h.touched.get(path, ())
                 if n > first and n in h.live and n not in chosen]
        if later:
            raise WalError(f"LSN {first} cannot be undone alone: LSN {later[-1]} changed "
                           f"{path} after it", f"undo both (`git wal undo --to {first - 1}`), "
                           f"or undo LSN {later[-1]} first")
    return {p: (s, m if s != ABSENT else 0) for p, (s, m, _n) in restore.items()}


def redo_restore(h: History, undo_lsn: int) -> Restore:
    """What redoing undo ``undo_lsn`` gives each path back: its state before the
    undo; refused when a later step changed the path."""
    if undo_lsn not in h.undos:
        raise WalError(f"LSN {undo_lsn} is not a committed undo of this run",
                       "`git wal log` lists the run's undos")
    if undo_lsn in h.redone:
        raise WalError(f"undo LSN {undo_lsn} was redone already", "undo the steps again instead")
    _intent, changes = h.undos[Lsn(undo_lsn)]
    for c in changes:
        # Later undos and redos that cancel out leave the path as the undo left
        # it; a step in effect that changed it since does not.
        later = [n for n, _after in h.touched.get(c.path, ()) if n > undo_lsn]
        live = [n for n in later if n in h.live]
        if live or h.newest_state(c.path) != c.after:
            by = (live or later)[-1]
            raise WalError(f"undo LSN {undo_lsn} cannot be redone: LSN {by} changed "
                           f"{c.path} after it", f"undo LSN {by} first")
    return {c.path: (c.before, c.before_mode if c.before != ABSENT else 0) for c in changes}


def log_problems(repo: pygit2.Repository, records: Iterable[Record]) -> list[tuple[Lsn, str]]:
    """(LSN, why) for each committed undo or redo that did not write exactly what
    the log before it says it should have (`git wal verify`)."""
    h = History()
    out: list[tuple[Lsn, str]] = []
    for intent, _commit in h.replay(repo, records):
        if intent.tool in RESTORING and (why := _restoring_problem(h, intent)):
            out.append((intent.lsn, f"{intent.tool} LSN {intent.lsn}: {why}"))
    return out


def _restoring_problem(h: History, intent: Intent) -> str:
    args = intent.args
    try:
        want = (undo_restore(h, {Lsn(n) for n in args.get("undoes", [])})
                if intent.tool == "undo" else redo_restore(h, int(args.get("redoes", 0))))
    except (WalError, TypeError, ValueError) as e:
        return e.message if isinstance(e, WalError) else str(e)
    have = {p: (c, m) for p, c, m in zip(args.get("paths", []), args.get("contents", []),
                                         args.get("modes", []), strict=False)}
    if have != want:
        differ = sorted(p for p in {*have, *want} if have.get(p) != want.get(p))
        return (f"it writes {', '.join(differ[:5])} otherwise than the steps it names "
                "had them before (contents or modes edited?)")
    return ""
