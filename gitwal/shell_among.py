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
  not refused (the command has run by then).

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

from .claims import claims_on, now_s
from .errors import WalError
from .history import changes_of, tree_changes
from .ids import UNKNOWN
from .log.chain import Chain
from .log.segments import Failure
from .log.store import list_runs
from .records.model import EXEC_TOOL, Abort, Claim, Commit, Intent, Record, Seal
from .repository import worktree_name
from .worktree.snapshot import tree_state

__all__ = ["Named", "OTHERS_ARG", "among", "check_named", "others_now", "theirs"]

OTHERS_ARG = "others"  # the exec intent's args key: {run: newest LSN at the intent}
Named = tuple[tuple[str, str, int], ...]  # (path, run, LSN)


def _here(chain: Chain, head: Any, here: str) -> bool:
    bound = chain.root_plan(head).worktree
    return bound is None or bound[0] == here


def others_now(repo: pygit2.Repository, me: str) -> dict[str, int]:
    """Every other run of this worktree that may still append: its newest LSN.
    Read before the pre snapshot (module docstring)."""
    here = worktree_name(repo)
    out: dict[str, int] = {}
    for rid in list_runs(repo):
        if rid == me:
            continue
        chain = Chain(repo, rid)
        try:
            head = chain.head()
            if head is None:
                continue
            last = chain.head_records(head)[-1]
            if isinstance(last, Seal) or not _here(chain, head, here):
                continue  # sealed: nothing more to come; bound elsewhere: not our tree
        except WalError:
            continue  # a damaged log is reported by its own commands
        out[str(rid)] = int(last.lsn)
    return out


def _closed_since(chain: Chain, seen: int) -> list[tuple[Intent, Commit | None]]:
    """The steps of one run whose commit came after LSN ``seen``, newest first;
    first of all its open file intent, if its newest record is one (a step
    that may have written its targets and not yet appended its commit)."""
    head = chain.head()
    commits: list[Commit] = []
    intents: dict[int, Intent] = {}
    in_flight: list[tuple[Intent, Commit | None]] = []
    if head is not None:
        last = chain.head_records(head)[-1]
        if isinstance(last, Intent) and last.tool != EXEC_TOOL:
            in_flight.append((last, None))
    while head is not None:
        records = chain.head_records(head)
        for rec in reversed(records):
            if isinstance(rec, Commit) and rec.lsn > seen:
                commits.append(rec)
            elif isinstance(rec, Intent):
                intents[rec.lsn] = rec
        wanted = [c.intent for c in commits if c.intent not in intents]
        if records[0].lsn <= seen and not wanted:
            break
        head = chain.parent(head)
    return in_flight + [(intents[c.intent], c) for c in commits if c.intent in intents]


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
    here = worktree_name(repo)
    found: dict[str, tuple[str, int]] = {}
    for rid in list_runs(repo):
        if rid == me:
            continue
        chain = Chain(repo, rid)
        try:
            head = chain.head()
            if head is None or not _here(chain, head, here):
                continue
            steps = _closed_since(chain, int(seen.get(str(rid), 0)))
        except WalError:
            continue
        for step, commit in steps:  # newest first: the newest matching step names it
            for path, after in _posts(repo, step, commit).items():
                if (path in changed and path not in found
                        and tree_state(repo, post, path) == after):
                    found[path] = (str(rid), int(step.lsn))
    return tuple((p, r, n) for p, (r, n) in sorted(found.items()))


def among(repo: pygit2.Repository, me: str, intent: Intent, post: str,
          now: int | None = None) -> tuple[Named, Named]:
    """``theirs`` and ``claimed`` for the closing of exec ``intent`` with the
    post tree ``post``."""
    mine_theirs = theirs(repo, me, intent, post)
    skip = {t[0] for t in mine_theirs}
    mine = [c.path for c in tree_changes(repo, intent.pre[0], post) if c.path not in skip]
    t = now_s() if now is None else now
    claimed = tuple(sorted({(p, c.run, c.lsn) for c, p in claims_on(repo, me, mine, t)}))
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
    from .claims import matches  # claims imports nothing of this module's users

    out: list[Failure] = []
    opened: dict[int, Intent] = {}
    for rec in records:
        if isinstance(rec, Intent):
            opened[rec.lsn] = rec
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
