"""`git wal fetch`: mirror a remote's logs, then integrate them by compare-and-swap.

The remote's logs land in ``refs/wal-remote/<remote>/...`` (a copy of what
the remote has, overwritten like ``refs/remotes/``); local refs then move
through :class:`~gitwal.log.store.Store` (the only writer of ``refs/wal/*``):
create, fast-forward, or report. A local log is never rewound or replaced by
one that does not continue it, and nothing that fails the chain checks is
integrated (:mod:`gitwal.remote.checks`).
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from ..base import progress
from ..base.errors import RunBusy, WalError
from ..base.ids import CommitId, RunId, valid_run_id
from ..base.repository import open_repository
from ..log.rewrite import ARCHIVE_PREFIX, CHECKPOINT_PREFIX
from ..log.store import Store
from .checks import chain_defect, compaction_defect
from .claim_push import refresh
from .refs import (
    BARE_OK,
    LIVE_PREFIX,
    RefOutcome,
    Transfer,
    ancestor_or_same,
    archived,
    fetch_refspecs,
    last_line,
    resolve_remote,
    split_ref,
    staging_prefix,
)


def _staged(repo: pygit2.Repository, remote: str) -> dict[str, str]:
    """Local ref name -> what the remote had at the last fetch."""
    stage = staging_prefix(remote)
    out = {}
    for name in repo.references:
        if name.startswith(stage) and not name.startswith(stage + "wal-claims/"):
            out["refs/" + name[len(stage):]] = str(repo.references[name].target)
    return out


def _describe_split(repo: pygit2.Repository, ours: str, theirs: str) -> str:
    try:
        base = repo.merge_base(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    except (KeyError, ValueError, pygit2.GitError):
        base = None
    since = f"they share history up to {str(base)[:12]}" if base else "no common history"
    return f"local {ours[:12]}, remote {theirs[:12]}: {since}"


def _integrate_live(repo: pygit2.Repository, run: str, ref: str, theirs: str) -> RefOutcome:
    store = Store(repo, RunId(run))
    try:
        with store.locked(wait=False):
            ours = store.head()
            if ours is not None and ours == theirs:
                return RefOutcome(ref, "up-to-date")
            if ours is not None and ancestor_or_same(repo, theirs, ours):
                return RefOutcome(ref, "ahead", "push it with `git wal push`")
            if ours is None and (kept := archived(repo, run, theirs)):
                return RefOutcome(ref, "dropped",
                                  f"dropped here (kept in {kept}); the remote still has it")
            # Whatever comes in must be a log before any ref points at it.
            if (bad := chain_defect(repo, run, ref, theirs)) is not None:
                return RefOutcome(ref, "invalid", bad)
            if ours is None:
                store.create_ref(ref, theirs)
                return RefOutcome(ref, "created", theirs[:12])
            if ancestor_or_same(repo, ours, theirs):
                store.move_head(ours, CommitId(theirs))
                return RefOutcome(ref, "updated", f"{ours[:12]}..{theirs[:12]}")
            why = "no archive keeps the local head"
            for n, head in store.archives():
                archive = f"{ARCHIVE_PREFIX}{run}/{n}"
                why = compaction_defect(repo, run, ours, archive, head, theirs) or ""
                if not why:
                    # Compacted on the remote: the archive keeps our head, and
                    # the new chain joins it record for record.
                    store.move_head(ours, CommitId(theirs))
                    return RefOutcome(ref, "compacted", f"{ours[:12]} is kept in {archive}")
            return RefOutcome(ref, "diverged", f"{_describe_split(repo, ours, theirs)}; {why}")
    except RunBusy as e:
        return RefOutcome(ref, "busy", e.message)


def _integrate_once(repo: pygit2.Repository, run: str, ref: str, theirs: str) -> RefOutcome:
    """Archives and detached checkpoints are written once: create, or compare."""
    current = repo.references.get(ref)
    if current is None:
        if ref.startswith(ARCHIVE_PREFIX) and (
                bad := chain_defect(repo, run, ref, theirs, live=False)) is not None:
            return RefOutcome(ref, "invalid", bad)
        try:
            Store(repo, RunId(run)).create_ref(ref, theirs)
        except RunBusy as e:
            return RefOutcome(ref, "busy", e.message)
        return RefOutcome(ref, "created", theirs[:12])
    ours = str(current.target)
    if ours == theirs:
        return RefOutcome(ref, "up-to-date")
    return RefOutcome(ref, "diverged", f"written once, but {_describe_split(repo, ours, theirs)}")


def _mirror(cwd: Path, name: str, run: str | None) -> None:
    """The remote's logs (or ``run``'s alone) copied into the staging namespace."""
    specs = fetch_refspecs(name, run)
    proc = progress.run_git(cwd, ["fetch", "--no-tags", "--prune", "--no-write-fetch-head",
                                  "--recurse-submodules=no", name, *specs],
                            f"fetching from {name}")
    if proc.returncode != 0:
        raise WalError(f"git fetch {name} failed: {last_line(proc.stderr)}",
                       "check the remote's URL and your access (`git remote -v`); "
                       "no local log was changed")


def remote_heads(cwd: Path, remote: str | None) -> tuple[str, dict[str, str]]:
    """The remote's runs and the head of each one's live log, fetched into the
    staging namespace only: no local log moves, and what was fetched stays data
    (read, never acted on)."""
    name = resolve_remote(cwd, remote)
    _mirror(cwd, name, None)
    repo = open_repository(cwd, BARE_OK)
    heads = {}
    for ref, oid in _staged(repo, name).items():
        where = split_ref(ref)
        if where is not None and where[0] == LIVE_PREFIX and valid_run_id(where[1]):
            heads[where[1]] = oid
    return name, heads


def fetch(cwd: Path, remote: str | None, offline: bool = False,
          run: str | None = None) -> Transfer:
    """Fetch the remote's logs (or ``run``'s alone) into the staging namespace,
    then integrate them."""
    name = resolve_remote(cwd, remote)
    if run is not None and not valid_run_id(run):
        raise WalError(f"invalid run id {run!r}",
                       "run ids are letters, digits, '.', '_' and '-' (`git wal runs`)")
    if not offline:
        _mirror(cwd, name, run)
    repo = open_repository(cwd, BARE_OK)  # opened after the fetch: its objects are visible
    if not offline and run is None and (why := refresh(repo, name, logs=False)) is not None:
        raise WalError(f"git fetch of the claims on {name} failed: {why}",
                       "check the remote's URL and your access (`git remote -v`)")
    staged = _staged(repo, name)
    if run is not None:
        staged = {ref: oid for ref, oid in staged.items()
                  if (where := split_ref(ref)) is not None and where[1] == run}
        if not staged:
            raise WalError(f"remote {name} has no log of run {run}",
                           f"`git ls-remote {name} 'refs/wal/*'` lists the runs it has")
    # Archives first: a live ref the remote compacted moves only once they are here.
    order = {ARCHIVE_PREFIX: 0, CHECKPOINT_PREFIX: 1, LIVE_PREFIX: 2}

    def rank(ref: str) -> tuple[int, str]:
        where = split_ref(ref)
        return (order[where[0]] if where else 3, ref)

    outcomes = []
    for ref in sorted(staged, key=rank):
        where = split_ref(ref)
        if where is None:
            outcomes.append(RefOutcome(ref, "ignored", "not a name gitwal writes"))
        elif where[0] == LIVE_PREFIX:
            outcomes.append(_integrate_live(repo, where[1], ref, staged[ref]))
        else:
            outcomes.append(_integrate_once(repo, where[1], ref, staged[ref]))
    return Transfer(name, tuple(sorted(outcomes, key=lambda o: o.ref)))
