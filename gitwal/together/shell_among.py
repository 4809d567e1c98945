"""A shell step among other runs (docs/agents-together.md, "Shell steps among
other runs").

An ``exec`` step cannot name its paths in advance, so it records its effect
as the difference between a snapshot of the tree before (its intent's pre
tree) and after (its closing's post tree). A step of another run that
commits in between shows up in that difference. So:

* the intent notes every other run's newest LSN (``args.others``: run ->
  LSN), read *before* the pre snapshot, so whatever another run commits
  after that read is either in the pre tree already or a step this module
  finds at the closing;
* the closing names **theirs**: each path the two trees differ in where
  another run (of this worktree, or unbound) closed a step after its noted
  LSN that changed the path, or has a file step in flight on it (its open
  intent is its newest record: written, perhaps, and not yet committed), and
  the post tree holds exactly that step's post there. The record carries
  ``[path, run, LSN of that step's intent]``; history.changes_of leaves
  those paths out of the step's effect, so history, undo, `git wal order`
  and verify all read one answer, from git objects alone. A path the
  command changed after the other run's step holds neither state and stays
  the shell step's;
* the closing names **claimed**: each path of the step's own effect another
  live run claims (claims.py), ``[path, run, LSN of the claim]``: reported,
  not refused (the command has run by then). Another clone's claim on a
  remote (remote_claims.py) that one of those paths hits is told on stderr,
  naming its run, clone and task, and not recorded: ``claimed`` names claim
  records verify checks in a log this clone may not have.

An intent without ``args.others`` (a log written before this existed)
excludes nothing: "committed while it ran" cannot be told from its records.
Cost at the intent: one ref read and one append read per other run (its plan
too, once, for its worktree); at the closing, for each other run, the appends
after its noted LSN (usually none) and only when the trees differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pygit2

from ..base.errors import WalError
from ..base.ids import UNKNOWN, RunId
from ..changes.history import changes_of, tree_changes
from ..log.chain import Chain
from ..log.segments import Failure
from ..records.model import (
    EXEC_TOOL,
    Abort,
    Claim,
    Commit,
    Intent,
    Record,
    Unlogged,
)
from ..trust.authority import may_act
from ..worktree.treeread import tree_state
from .claims import claims_on, matches, now_s
from .live_others import left_to_others, others_now
from .open_intents import closed_steps, runs_here
from .remote_claims import tell_shell_hits

__all__ = ["Named", "OTHERS_ARG", "among", "check_named", "left_by_others", "left_to_others",
           "others_now", "theirs"]

OTHERS_ARG = "others"  # the exec intent's args key: {run: newest LSN at the intent}
Named = tuple[tuple[str, str, int], ...]  # (path, run, LSN)


def _intent_time(repo: pygit2.Repository, me: str, intent: Intent) -> int:
    """When ``intent`` (of run ``me``) was appended (0: not found)."""
    chain = Chain(repo, RunId(me))
    head = chain.head()
    if head is None:
        return 0
    for commit, records in chain.appends(head):
        if any(r.lsn <= intent.lsn for r in records):
            return commit.commit_time
    return 0


def _closed_since(chain: Chain, seen: int,
                  after: int | None = None) -> list[tuple[Intent, Commit | None]]:
    """The steps of one run whose commit came after LSN ``seen``, newest commit
    first; first of all its open file intent, if its newest record is one (a
    step that may have written its targets and not yet appended its commit)."""
    head = chain.head()
    if head is None:
        return []
    out: list[tuple[Intent, Commit | None]] = []
    last = chain.head_records(head)[-1]
    if isinstance(last, Intent) and last.tool != EXEC_TOOL:
        out.append((last, None))
    closed = sorted(closed_steps(chain, head, lambda lsn, at: lsn <= seen or (
        after is not None and at < after)),
                    key=lambda step: -step[1].lsn)
    return out + [(intent, commit) for intent, commit, _at in closed]


def _posts(repo: pygit2.Repository, step: Intent, commit: Commit | None) -> dict[str, str]:
    """path -> state a step left (committed), or means to leave (in flight)."""
    if commit is not None:
        return {c.path: c.after for c in changes_of(repo, step, commit)}
    return {p: s for p, s in zip(step.target, step.post or (), strict=False) if s != UNKNOWN}


def theirs(repo: pygit2.Repository, me: str, intent: Intent, post: str) -> Named:
    """The paths of exec ``intent``'s tree difference (pre tree -> ``post``)
    that other runs' steps committed while it ran (module docstring)."""
    seen = intent.args.get(OTHERS_ARG)
    if not isinstance(seen, dict):
        return ()
    changed = {c.path for c in tree_changes(repo, intent.pre[0], post)}
    if not changed:
        return ()
    found: dict[str, tuple[str, int]] = {}
    started: int | None = None
    for rid, chain, _head in runs_here(repo, me):
        try:
            if str(rid) in seen:
                steps = _closed_since(chain, int(seen[str(rid)]))
            else:  # not live at the intent: only what it committed since then
                started = _intent_time(repo, me, intent) if started is None else started
                steps = _closed_since(chain, 0, started)
        except WalError:
            continue
        for step, commit in steps:  # newest first: the newest matching step names it
            if not may_act(repo, step):
                continue  # another clone's step changed another tree
            for path, after in _posts(repo, step, commit).items():
                if (path in changed and path not in found
                        and tree_state(repo, post, path) == after):
                    found[path] = (str(rid), int(step.lsn))
    return tuple((p, r, n) for p, (r, n) in sorted(found.items()))


WALK_LIMIT = 1000  # appends read back per other run to attribute an unlogged change


def left_by_others(repo: pygit2.Repository, me: str, found: dict[str, str]) -> Named:
    """Which of the changes ``found`` (path -> state, noticed as not this run's)
    another run of this worktree left: its newest step whose post there is that
    state (or its file step in flight, writing it). Each other run is read
    newest first, until every path is named or ``WALK_LIMIT`` appends back."""
    named: dict[str, tuple[str, int]] = {}
    for _rid, chain, head in runs_here(repo, me):
        if len(named) == len(found):
            break
        try:
            _name_from(repo, chain, head, found, named)
        except WalError:
            continue  # a damaged log is reported by its own commands; it explains nothing
    return tuple((p, r, n) for p, (r, n) in sorted(named.items()))


def _name_from(repo: pygit2.Repository, chain: Chain, head: Any, found: dict[str, str],
               named: dict[str, tuple[str, int]]) -> None:
    mine: dict[str, tuple[int, int]] = {}  # path -> (closing LSN, step LSN), the newest

    def match(step: Intent, commit: Commit | None) -> None:
        if not may_act(repo, step):
            return  # another clone's step: it explains nothing in this tree
        closed = commit.lsn if commit is not None else 1 << 62  # in flight: newest of all
        for path, after in _posts(repo, step, commit).items():
            if (found.get(path) == after and path not in named
                    and closed > mine.get(path, (0, 0))[0]):
                mine[path] = (closed, int(step.lsn))

    last = chain.head_records(head)[-1]
    if isinstance(last, Intent) and last.tool != EXEC_TOOL:
        match(last, None)
    for step, commit, _at in closed_steps(chain, head, limit=WALK_LIMIT):
        match(step, commit)
        if len(named) + len(mine) == len(found):
            break
    for path, (_closed, lsn) in mine.items():
        named.setdefault(path, (str(chain.run), lsn))


def among(repo: pygit2.Repository, me: str, intent: Intent, post: str,
          now: int | None = None) -> tuple[Named, Named]:
    """``theirs`` and ``claimed`` for the closing of exec ``intent`` with the
    post tree ``post``."""
    mine_theirs = theirs(repo, me, intent, post)
    skip = {t[0] for t in mine_theirs}
    mine = [c.path for c in tree_changes(repo, intent.pre[0], post) if c.path not in skip]
    t = now_s() if now is None else now
    claimed = tuple(sorted({(p, c.run, c.lsn) for c, p in claims_on(repo, me, mine, t)}))
    tell_shell_hits(repo, me, intent.lsn, mine, matches)
    return mine_theirs, claimed


def check_named(repo: pygit2.Repository, run: str, records: Iterable[Record],
                load: Callable[[str], Sequence[Record] | None],
                notes: list[str] | None = None) -> list[Failure]:
    """`git wal verify`: every ``theirs`` entry of ``run``'s closings names
    another run's committed step that changed the path to the state the post
    tree holds, and closed after the LSN the intent noted for that run; every
    ``claimed`` entry names a claim record of that run whose pattern matches
    the path. ``load``: another run's records (None if it cannot be read: a
    dropped run, say; then a line in ``notes`` says what was not checked)."""
    out: list[Failure] = []
    opened: dict[int, Intent] = {}
    for rec in records:
        if isinstance(rec, Intent):
            opened[rec.lsn] = rec
            continue
        if isinstance(rec, Unlogged) and rec.theirs:
            out += _unlogged_theirs(repo, run, rec, load, notes)
            continue
        if not isinstance(rec, Commit | Abort) or not (rec.theirs or rec.claimed):
            continue
        intent = opened.get(rec.intent)
        if intent is None or intent.tool != EXEC_TOOL:
            out.append(Failure(run, "among", "theirs/claimed on a closing that does not "
                               "close an exec intent", rec.lsn))
            continue
        post = rec.post[0] if isinstance(rec, Commit) else dict(rec.saved).get(".")
        seen = intent.args.get(OTHERS_ARG) or {}
        for path, other, _lsn in (*rec.theirs, *rec.claimed):
            if load(other) is None and notes is not None:
                notes.append(f"LSN {rec.lsn}: {path} names run {other}, whose log cannot "
                             "be read here: not checked")
        for path, other, lsn in rec.theirs:
            if load(other) is None:
                continue
            why = _their_problem(repo, load(other), path, lsn, post,
                                 int(seen.get(other, 0)) if isinstance(seen, dict) else 0)
            if why:
                out.append(Failure(run, "among", f"LSN {rec.lsn}: theirs {path} "
                                   f"(run {other} LSN {lsn}): {why}", rec.lsn))
        for path, other, lsn in rec.claimed:
            recs = load(other)
            if recs is None:
                continue
            claim = next((r for r in recs or () if r.lsn == lsn), None)
            if not (isinstance(claim, Claim) and claim.ttl > 0
                    and any(matches(p, path) for p in claim.paths)):
                out.append(Failure(run, "among", f"LSN {rec.lsn}: claimed {path}: run "
                                   f"{other} LSN {lsn} is no claim of it", rec.lsn))
    return out


def _unlogged_theirs(repo: pygit2.Repository, run: str, rec: Unlogged,
                     load: Callable[[str], Sequence[Record] | None],
                     notes: list[str] | None) -> list[Failure]:
    """Each ``theirs`` entry of an unlogged record names a step of that run whose
    post (committed, or intended while in flight) is the state found."""
    out: list[Failure] = []
    observed = dict(zip(rec.paths, rec.observed, strict=True))
    for path, other, lsn in rec.theirs:
        records = load(other)
        if records is None:
            if notes is not None:
                notes.append(f"LSN {rec.lsn}: {path} names run {other}, whose log cannot "
                             "be read here: not checked")
            continue
        step = next((r for r in records if r.lsn == lsn), None)
        closing = next((r for r in records if isinstance(r, Commit) and r.intent == lsn),
                       None)
        after = _posts(repo, step, closing) if isinstance(step, Intent) else {}
        if after.get(path) != observed[path]:
            out.append(Failure(run, "among", f"LSN {rec.lsn}: unlogged {path} names run "
                               f"{other} LSN {lsn}, which did not leave it as found",
                               rec.lsn))
    return out


def _their_problem(repo: pygit2.Repository, records: Sequence[Record] | None, path: str,
                   lsn: int, post: str | None, seen: int) -> str:
    if records is None:
        return "that run's log cannot be read"
    step = next((r for r in records if r.lsn == lsn), None)
    closing = next((r for r in records if isinstance(r, Commit | Abort) and r.intent == lsn),
                   None)
    if not isinstance(step, Intent):
        return "no step there"
    if closing is not None and closing.lsn <= seen:
        return f"it closed (LSN {closing.lsn}) before the intent (which noted LSN {seen})"
    if isinstance(closing, Abort) and step.tool == EXEC_TOOL:
        return "that shell step was aborted"
    # A file step still open, or aborted, was in flight when the post tree was
    # taken: its intent's post is what it wrote.
    after = _posts(repo, step, closing if isinstance(closing, Commit) else None)
    if path not in after:
        return "that step did not change the path"
    if post is not None and isinstance(repo.get(post), pygit2.Tree) \
            and tree_state(repo, post, path) != after[path]:
        return "the post tree does not hold that step's post there"
    return ""
