"""Checkpoint, compact, gate, drop: the run's log meets the agent's branch.

Rule (the essay's): checkpoint first, compact second. A checkpoint is an
ordinary git commit holding exactly the tree the log explains, named by a
``checkpoint`` record; only then may the records before it leave the live
chain, and only then may an agent compact its transcript.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import partial

import pygit2

from ..base.crashpoints import crash_point
from ..base.errors import WalError
from ..base.ids import CommitId, Lsn, TreeId
from ..changes.commands import run_check
from ..changes.ledger import COMMITTED, EXPLAINED, Ledger, fold
from ..log.authorship import attach
from ..log.rewrite import ARCHIVE_PREFIX, CHECKPOINT_PREFIX
from ..log.store import Ref, RunSealed
from ..records.codec import encode
from ..records.model import Checkpoint, Commit, Intent, Record, Seal
from ..remote.claim_push import drop_remote
from ..run import Run
from ..worktree.tree import Worktree, blob_id
from ..worktree.treeread import tree_state
from .branch_commit import commit_tree

TRAILERS = ("Wal-Run", "Wal-Lsn")


class CheckpointRefused(WalError):
    """The tree or the log is not in a state a checkpoint may freeze."""


@dataclass(frozen=True)
class CheckpointResult:
    lsn: Lsn
    git: CommitId
    ref: str
    covers: int
    unlogged: tuple[str, ...]
    reused_head: bool  # HEAD already held exactly this tree: no new commit


@dataclass(frozen=True)
class GateResult:
    safe: bool
    reason: str
    checkpoint: CheckpointResult | None = None


@dataclass(frozen=True)
class CompactResult:
    live_from: Lsn  # LSN of the record the live chain now starts at
    archived: str | None  # the archive ref, or None when dropped or nothing to do
    moved: bool  # False when the chain already started at the checkpoint


def _open_intent(records: list[Record]) -> Intent | None:
    last = records[-1]
    return last if isinstance(last, Intent) else None


def _git(wt: Worktree, *args: str, input: str | None = None,
         input_bytes: bytes | None = None, env: dict[str, str] | None = None) -> str:
    """Run git with its objects and refs fsynced (a record will name them),
    and the user's index: git renames a new index into place, and without
    its fsync a power loss can leave it empty (git status then fails)."""
    data = input.encode() if input is not None else input_bytes
    proc = subprocess.run(
        ["git", "-c", "core.fsync=committed,index", "-c", "core.fsyncMethod=fsync", *args],
        cwd=wt.root, capture_output=True, input=data,
        env=None if env is None else {**os.environ, **env},
    )
    if proc.returncode != 0:
        err = os.fsdecode(proc.stderr or proc.stdout).strip()[-2000:]
        raise CheckpointRefused(
            f"git {args[0]} failed: {err}",
            "fix what git reports (a commit hook may have refused), then checkpoint again",
        )
    return os.fsdecode(proc.stdout)


def unexplained(trees: Worktree, ledger: Ledger, snap: TreeId) -> list[str]:
    """Paths whose state in ``snap`` the ledger (from its base tree) does not explain."""
    repo, base = trees.repo, ledger.require_base()
    expected = ledger.expected()
    # The base is an ordinary commit's tree (git's form): compared with the
    # tree git itself made of the snapshot, a file git converts is no change.
    committed = trees.committed_forms.get(snap, snap)
    out = {p for p in trees.changed_paths(base, committed) if p not in expected}
    out |= {p for p, want in expected.items() if tree_state(repo, snap, p) != want}
    return sorted(out)


def checkpoint(run: Run, message: str | None = None, check: str | None = None,
               detached: bool = False, include_unlogged: bool = False) -> CheckpointResult:
    """Commit the tree the log explains and append a ``checkpoint`` record."""
    store, wt, repo = run.store, run.wt, run.store.repo
    with store.locked():
        head = store.head()
        assert head is not None
        records = store.segment()
        if isinstance(records[-1], Seal):  # refuse before the commit, not at the append
            raise RunSealed(f"run {run.id} is sealed (LSN {records[-1].lsn}): it cannot be "
                            "checkpointed", "a sealed run is finished; start a new one with "
                            "`git wal begin`")
        open_ = _open_intent(records)
        if open_ is not None:
            raise CheckpointRefused(
                f"run {run.id}: intent LSN {open_.lsn} is open (or in doubt)",
                f"run `git wal recover --run {run.id}` first",
            )
        plan = store.plan(records[0])
        snap = wt.snapshot(run.id)
        unlogged = unexplained(wt, fold(wt, records, COMMITTED), snap)
        # A change an `unlogged` record already saw is on record: the checkpoint
        # lists it like any unlogged path, but needs no --include-unlogged.
        seen = fold(wt, records, EXPLAINED).expected() if unlogged else {}
        pending = [p for p in unlogged if seen.get(p) != tree_state(repo, snap, p)]
        if pending and not include_unlogged:
            shown = ", ".join(pending[:10]) + (" ..." if len(pending) > 10 else "")
            raise CheckpointRefused(
                f"{len(pending)} path(s) changed that no committed step explains: {shown}",
                "undo those changes, or pass --include-unlogged to record them as unlogged",
            )
        lsn = Lsn(records[-1].lsn + 1)
        if check:
            # Never logged: it carries the user's --check to run_check, which runs
            # only commands with this clone's proof of authorship.
            probe = attach(repo, Intent(run.id, lsn, "checkpoint", {}, (".",), (snap,), None,
                                        (0,), "unsafe", f"{run.id}:{lsn}", check))
            result = run_check(check, wt, probe)
            if not result.ok:
                raise CheckpointRefused(f"check failed: {check}",
                                        (result.output.strip().splitlines() or [""])[-1][:200])
        text = (message or f"wal checkpoint: {plan.task or run.id}").rstrip()
        text += f"\n\nWal-Run: {run.id}\nWal-Lsn: {lsn}\n"
        # A checkpoint is an ordinary commit: its tree is git's form of the
        # snapshot (line endings converted, LFS pointers), never the bytes on disk.
        committed = wt.committed_forms.get(snap, snap)
        commit, ref, reused = _make_commit(run, committed, text, lsn, detached)
        crash_point("checkpoint-after-commit")
        got = repo[commit]
        assert isinstance(got, pygit2.Commit)
        tree = str(got.tree_id)
        if tree != committed:  # the tree moved between our check and `git commit`
            unlogged = sorted(set(unlogged) | set(wt.changed_paths(committed, TreeId(tree))))
        prev = records[0] if isinstance(records[0], Checkpoint) else None
        commits = [r for r in records if isinstance(r, Commit)]
        intents = {r.lsn: r for r in records if isinstance(r, Intent)}
        steps = set(prev.done_steps if prev else ())
        steps |= {s for c in commits if (s := intents[c.intent].step) is not None}
        covers = commits[-1].intent if commits else (prev.covers if prev else 0)
        plan_blob = blob_id(encode(plan))
        record = Checkpoint(
            run.id, lsn, commit, tree, ref, covers, plan_blob,
            (prev.committed if prev else 0) + len(commits), tuple(sorted(steps)),
            tuple(unlogged),
        )
        store.append([record], [Ref(plan_blob), Ref(tree, is_tree=True)], head)
        return CheckpointResult(lsn, commit, ref, covers, tuple(unlogged), reused)


def _make_commit(run: Run, snap: TreeId, message: str, lsn: Lsn,
                 detached: bool) -> tuple[CommitId, str, bool]:
    repo, wt = run.store.repo, run.wt
    head_commit = repo.head.peel(pygit2.Commit)
    if detached:
        ref = f"{CHECKPOINT_PREFIX}{run.id}/{lsn}"
        if str(head_commit.tree_id) == snap:
            commit = str(head_commit.id)
            reused = True
        else:
            # commit-tree honours commit.gpgSign; it runs no hooks (nothing is
            # committed to a branch, and the user's index is not involved).
            commit = _git(wt, "commit-tree", snap, "-p", str(head_commit.id),
                          "-m", message).strip()
            reused = False
        # Force: no record names this ref until the append below, so a ref left
        # by a checkpoint killed before its record is ours to replace.
        run.store.create_ref(ref, commit, force=True)
        return CommitId(commit), ref, reused
    ref = "HEAD" if repo.head_is_detached else repo.head.name
    if str(head_commit.tree_id) == snap:
        # HEAD already holds exactly this tree (an earlier checkpoint killed
        # before its record, or a manual commit): name it, make no empty commit.
        return CommitId(str(head_commit.id)), ref, True
    # An ordinary `git commit` (the repository's hooks and signing config
    # apply) of exactly the snapshot's tree, from a scratch index: the user's
    # index is carried over, their staged changes kept (branch_commit.py).
    commit_tree(repo, run.id, snap, message, partial(_git, wt))
    return CommitId(str(repo.head.peel(pygit2.Commit).id)), ref, False


def gate(run: Run | None, auto_checkpoint: bool = False, detached: bool = False) -> GateResult:
    """Is compacting the agent's context safe now? (Reads the segment only.)"""
    if run is None:
        return GateResult(True, "no run in this worktree: nothing to lose")
    records = run.store.segment()
    if isinstance(records[-1], Seal):
        return GateResult(True, f"run {run.id} is sealed: it is finished, nothing to lose")
    open_ = _open_intent(records)
    if open_ is not None:
        return GateResult(False, f"intent LSN {open_.lsn} ({open_.tool} "
                          f"{' '.join(open_.target)}) is open: run `git wal recover --run "
                          f"{run.id}` first, then `git wal checkpoint --run {run.id}`")
    pending = [r for r in records if isinstance(r, Commit)]
    if not pending:
        return GateResult(True, "every committed step is behind a checkpoint")
    if not auto_checkpoint:
        return GateResult(False, f"{len(pending)} committed step(s) since the last checkpoint: "
                          f"run `git wal checkpoint --run {run.id}` first")
    try:
        result = checkpoint(run, detached=detached)
    except WalError as e:
        return GateResult(False, f"could not checkpoint: {e.message} ({e.hint})")
    return GateResult(True, f"checkpointed at LSN {result.lsn} ({result.git[:12]})", result)


def compact(run: Run, drop: bool = False) -> CompactResult:
    """Move the records before the newest checkpoint out of the live chain.

    Order, so that a crash at any point leaves the old chain or the new one
    live (never neither) and no record unreachable unless --drop asked so:
    1. write the new chain (durable objects, no ref yet);
    2. archive the old head under refs/wal-archive/<run>/<n> (unless --drop);
    3. compare-and-swap the live ref from the old head to the new one.
    """
    store = run.store
    with store.locked():
        head = store.head()
        assert head is not None
        records = store.segment()
        first = records[0]
        if not isinstance(first, Checkpoint):
            raise CheckpointRefused(
                f"run {run.id} has no checkpoint: nothing may be compacted yet",
                f"run `git wal checkpoint --run {run.id}` first",
            )
        new_head = store.rewrite_from(head, first.lsn)
        if new_head == head:
            return CompactResult(first.lsn, None, False)
        crash_point("compact-after-rewrite")
        archived = None
        if not drop:
            archived = _archive(run, head)
            crash_point("compact-after-archive")
        store.move_head(head, new_head)
        return CompactResult(first.lsn, archived, True)


def _archive(run: Run, head: CommitId) -> str:
    """Keep ``head`` under the run's archive refs (reusing one that already does)."""
    existing = run.store.archives()
    for n, target in existing:
        if target == head:  # an earlier compaction was killed after archiving
            return f"{ARCHIVE_PREFIX}{run.id}/{n}"
    name = f"{ARCHIVE_PREFIX}{run.id}/{(existing[-1][0] + 1) if existing else 1}"
    run.store.create_ref(name, head)
    return name


def drop(run: Run) -> str:
    """Delete a run's live log on purpose: archive it first, then remove the ref."""
    with run.store.locked():
        head = run.store.head()
        assert head is not None
        name = _archive(run, head)
        run.store.delete_live(head)
        run.wt.forget_snapshots(run.id)
    drop_remote(run.store.repo, run.id)  # a dropped run holds no claim, on the remote either
    return name
