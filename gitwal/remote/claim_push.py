"""Taking and giving back claims on a remote (docs/remote-runs.md, "Claims
across clones"): the pushes of ``refs/wal-claims/*``, and the fetch of this
clone's copy of them.

Invariant: a claim ref is only ever moved by compare-and-swap with an
explicit expected value: ``--force-with-lease=<ref>:`` (it must not exist)
to take a path nobody holds, ``:<oid>`` to renew this run's own claim or to
replace one that expired (the new commit's parent is the old one: the ref
only fast-forwards), and ``:<oid we pushed>`` to delete it. Several patterns
go in one ``git push --atomic``: all taken, or none.

Each copy of the claim refs also fetches the live log of every run that
holds one (into ``refs/wal-remote/<remote>/wal/<run>``, as `git wal fetch`
stages logs) and records the pairs it saw (claim_seen.py): the holder's
appends keep its claims live, its silence expires them, by this clone's clock.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pygit2

from ..base.errors import RunBusy, WalError
from ..base.ids import valid_run_id
from ..base.repository import common_dir
from ..log.authorship import clone_id
from ..log.locks import tell
from ..log.packwrite import Signer
from .cas_push import Update, porcelain, push_args
from .claim_refs import (
    CLAIMS_PREFIX,
    COPY_LOCK,
    RemoteClaim,
    make_commit,
    of_patterns,
    ref_of,
    staged,
    staged_ref,
)
from .claim_seen import observe
from .push_heads import git_cwd, git_until
from .refs import LIVE_PREFIX, staging_prefix
from .replica_state import remote_of, replica_dir

__all__ = ["ClaimHeld", "Ended", "Holder", "drop", "drop_remote", "end_taken_over", "idle",
           "refresh", "take"]

CLAIM_LIMIT = 60.0  # seconds one claim push or fetch may take
_OK = ("created", "updated", "compacted", "up-to-date", "deleted")


class ClaimHeld(RunBusy):
    """Another clone's run holds a path this claim names, on the remote."""


@dataclass(frozen=True)
class Holder:
    """Who this claim is for (what the claim blob says)."""

    run: str
    clone: str
    task: str
    lsn: int


def _git(repo: pygit2.Repository, args: list[str], deadline: float) -> tuple[int | None, str, str]:
    return git_until(["git", f"--git-dir={common_dir(repo)}", *args], git_cwd(repo), deadline)


@contextmanager
def _copy_lock(repo: pygit2.Repository, remote: str) -> Iterator[None]:
    """One writer of this clone's copy of ``remote``'s claims at a time (the
    pusher's fetch, a claim's): no ref lock lost, no older copy written over
    a newer one."""
    fd = os.open(replica_dir(common_dir(repo), remote) / COPY_LOCK,
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def refresh(repo: pygit2.Repository, remote: str, deadline: float | None = None,
            now: int | None = None, logs: bool = True) -> str | None:
    """Copy the remote's claim refs into ``refs/wal-remote/<remote>/wal-claims/*``
    (pruned: a released claim goes away here too), then the live log of each
    run holding one (``logs`` False: `git wal fetch` staged every log just
    before), and record what was seen at ``now`` (this clone's clock, by
    default the time now: claim_seen.py); the error, or None. Nothing is
    recorded when a fetch fails: the claims stay as last watched."""
    end = time.monotonic() + CLAIM_LIMIT if deadline is None else deadline
    spec = f"+{CLAIMS_PREFIX}*:{staging_prefix(remote)}wal-claims/*"
    with _copy_lock(repo, remote):
        code, _out, err = _git(repo, ["fetch", "--no-tags", "--prune", "--no-write-fetch-head",
                                      "--recurse-submodules=no", remote, spec], end)
        if code != 0:
            return err or "the fetch did not finish in time"
        claims = staged(repo, remote)
        runs = sorted({c.run for c in claims if valid_run_id(c.run)})
        if logs and runs:
            # one pattern per run (a missing exact name would fail the fetch);
            # pruned: a run gone from the remote goes away here too
            stage = f"{staging_prefix(remote)}{LIVE_PREFIX[len('refs/'):]}"
            specs = [f"+{LIVE_PREFIX}{r}*:{stage}{r}*" for r in runs]
            code, _out, err = _git(repo, ["fetch", "--no-tags", "--prune",
                                          "--no-write-fetch-head", "--recurse-submodules=no",
                                          remote, *specs], end)
            if code != 0:
                return err or "the fetch did not finish in time"
        observe(common_dir(repo), remote, int(time.time()) if now is None else now,
                {c.ref: (c.commit, _staged_head(repo, remote, c.run)) for c in claims})
    return None


def _staged_head(repo: pygit2.Repository, remote: str, run: str) -> str | None:
    if not valid_run_id(run):
        return None
    ref = repo.references.get(f"{staging_prefix(remote)}{LIVE_PREFIX[len('refs/'):]}{run}")
    return None if ref is None else str(ref.target)


Ended = Callable[[RemoteClaim], bool]


def _expected(found: RemoteClaim | None, me: Holder, ended: Ended) -> str:
    """The lease for one ref: its commit when it is this run's, expired or
    ended, else empty (it must not exist: a live claim of another's is not
    replaced)."""
    if found is None:
        return ""
    if (found.run == me.run and found.clone == me.clone) or not found.live() or ended(found):
        return found.commit
    return ""


def _blocking(found: RemoteClaim | None, me: Holder, ended: Ended) -> bool:
    return found is not None and _expected(found, me, ended) == ""


def take(repo: pygit2.Repository, remote: str, me: Holder, patterns: Sequence[str],
         at: int, ttl: int, signer: Signer | None, now: int | None = None,
         ended: Ended = lambda _c: False) -> None:
    """Take ``patterns`` for ``me`` on ``remote`` in one atomic push; raise
    :class:`ClaimHeld` naming the holder when another live claim holds one,
    :class:`WalError` when the remote cannot be reached. A claim is replaced
    when this clone's watch expired it, or ``ended`` says its run's fetched
    log ended it; ``now``: this clone's clock for the copies it makes."""
    deadline = time.monotonic() + CLAIM_LIMIT
    refs = {ref_of(p): p for p in patterns}
    for attempt in range(3):
        have = of_patterns(staged(repo, remote), remote)
        held = [have[r] for r in refs if _blocking(have.get(r), me, ended)]
        if held and attempt > 0:
            raise _held(remote, held)
        leases = {r: _expected(have.get(r), me, ended) for r in refs}
        pushed = {r: make_commit(repo, run=me.run, clone=me.clone, task=me.task,
                                 pattern=p, at=at, ttl=ttl, lsn=me.lsn,
                                 parent=leases[r] or None, signer=signer)
                  for r, p in refs.items()}
        args = push_args(remote, [Update(r, pushed[r], leases[r]) for r in refs], atomic=True)
        _code, stdout, stderr = _git(repo, args, deadline)
        seen = porcelain(stdout)
        if not seen:
            raise WalError(f"could not take the claim on {remote}: "
                           f"{stderr or 'the push did not finish in time'}",
                           f"the remote must be reachable to claim across clones "
                           f"(`git ls-remote {remote}`); the local claim was released")
        if all(seen.get(r) is not None and seen[r].status in _OK for r in refs):
            refresh(repo, remote, deadline, now)  # the others' claims too (best effort)
            with _copy_lock(repo, remote):
                for r in refs:
                    repo.references.create(staged_ref(remote, r), pygit2.Oid(hex=pushed[r]),
                                           force=True)
            return
        if (why := refresh(repo, remote, deadline, now)) is not None:
            raise WalError(f"{remote} refused the claim and could not be read: {why}",
                           f"`git ls-remote {remote} '{CLAIMS_PREFIX}*'` lists its claims")
    raise WalError(f"the claims on {remote} kept moving: not taken",
                   "claim again (`git wal claim`)")


def _held(remote: str, held: list[RemoteClaim]) -> ClaimHeld:
    c = held[0]
    shown = c.pattern if c.pattern.isprintable() else repr(c.pattern)
    return ClaimHeld(
        f"{shown} is claimed on {remote} by run {c.run} of clone {c.clone} "
        f"(task {c.task!r}); {idle(c)}",
        f"coordinate with run {c.run}: it releases the path with `git wal release`, "
        "or the claim expires; `git wal runs` lists the remote's claims")


def idle(c: RemoteClaim) -> str:
    """How long more this clone must see the claim's run idle on the remote."""
    return f"it expires after {c.left} s more without an append of its run on {c.remote}"


def drop(repo: pygit2.Repository, remote: str, run: str, clone: str | None,
         patterns: Sequence[str] | None) -> str | None:
    """Delete ``run``'s claim refs on ``remote`` (of ``patterns``, or all of
    them; taken in ``clone``, or in any clone when None), each by
    compare-and-swap from the commit this clone last saw there;
    the error, or None. Best effort: a remote that cannot be reached keeps
    the claim until it expires."""
    deadline = time.monotonic() + CLAIM_LIMIT
    mine = [c for c in staged(repo, remote) if c.run == run and clone in (None, c.clone)
            and (patterns is None or c.pattern in patterns)]
    if not mine:
        return None
    args = push_args(remote, [Update(c.ref, None, c.commit) for c in mine], atomic=True)
    _code, stdout, stderr = _git(repo, args, deadline)
    seen = porcelain(stdout)
    if not seen:
        return stderr or "the push did not finish in time"
    failed = [c for c in mine if seen.get(c.ref) is None or seen[c.ref].status not in _OK]
    with _copy_lock(repo, remote):
        for c in mine:
            if c not in failed:
                try:
                    repo.references.delete(staged_ref(remote, c.ref))
                except KeyError:
                    pass
    if failed:
        refresh(repo, remote, deadline)
        return f"{remote} kept {failed[0].ref}: {seen.get(failed[0].ref) or stderr}"
    return None


def drop_remote(repo: pygit2.Repository, run: str,
                patterns: Sequence[str] | None = None) -> None:
    """Delete ``run``'s claim refs on its remote, if it has one (released,
    sealed, dropped); when the remote cannot be reached they stay there until
    they expire, which stderr says."""
    if (remote := remote_of(repo, run)) is None:
        return
    if (why := drop(repo, remote, run, clone_id(repo), patterns)) is not None:
        tell(f"warning: the claims of run {run} on {remote} were not deleted ({why}); "
             "they bind other clones until they expire, or this run's log on the remote ends them")


def end_taken_over(repo: pygit2.Repository, remote: str, run: str) -> None:
    """A run taken over here holds no claim of the clone it was taken from:
    its claim refs on ``remote`` deleted, whichever clone took them."""
    deadline = time.monotonic() + CLAIM_LIMIT
    why = refresh(repo, remote, deadline) or drop(repo, remote, run, None, None)
    if why is not None:
        tell(f"warning: the claims of run {run} on {remote} were not deleted ({why}); "
             "they bind other clones until they expire, or this run's log on the remote ends them")
