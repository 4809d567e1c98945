"""Taking and giving back claims on a remote (docs/remote-runs.md, "Claims
across clones"): the pushes of ``refs/wal-claims/*``, and the fetch of this
clone's copy of them.

Invariant: a claim ref is only ever moved by compare-and-swap with an
explicit expected value: ``--force-with-lease=<ref>:`` (it must not exist)
to take a path nobody holds, ``:<oid>`` to renew this run's own claim or to
replace one that expired (the new commit's parent is the old one: the ref
only fast-forwards), and ``:<oid we pushed>`` to delete it. Several patterns
go in one ``git push --atomic``: all taken, or none.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pygit2

from ..base.errors import RunBusy, WalError
from ..base.repository import common_dir
from ..log.authorship import clone_id
from ..log.locks import tell
from ..log.packwrite import Signer
from .cas_push import porcelain
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
from .push_heads import git_cwd, git_until
from .refs import staging_prefix
from .replica_state import remote_of, replica_dir

__all__ = ["ClaimHeld", "Holder", "drop", "drop_remote", "end_taken_over", "refresh", "take"]

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


def refresh(repo: pygit2.Repository, remote: str, deadline: float | None = None) -> str | None:
    """Copy the remote's claim refs into ``refs/wal-remote/<remote>/wal-claims/*``
    (pruned: a released claim goes away here too); the error, or None."""
    end = time.monotonic() + CLAIM_LIMIT if deadline is None else deadline
    spec = f"+{CLAIMS_PREFIX}*:{staging_prefix(remote)}wal-claims/*"
    with _copy_lock(repo, remote):
        code, _out, err = _git(repo, ["fetch", "--no-tags", "--prune", "--no-write-fetch-head",
                                      "--recurse-submodules=no", remote, spec], end)
    if code != 0:
        return err or "the fetch did not finish in time"
    return None


def _expected(found: RemoteClaim | None, me: Holder, now: int) -> str:
    """The lease for one ref: its commit when it is this run's or expired, else
    empty (it must not exist: a live claim of another's is not replaced)."""
    if found is None:
        return ""
    if (found.run == me.run and found.clone == me.clone) or not found.live(now):
        return found.commit
    return ""


def _blocking(found: RemoteClaim | None, me: Holder, now: int) -> bool:
    return found is not None and _expected(found, me, now) == ""


def take(repo: pygit2.Repository, remote: str, me: Holder, patterns: Sequence[str],
         at: int, ttl: int, signer: Signer | None) -> None:
    """Take ``patterns`` for ``me`` on ``remote`` in one atomic push; raise
    :class:`ClaimHeld` naming the holder when another live claim holds one,
    :class:`WalError` when the remote cannot be reached."""
    deadline = time.monotonic() + CLAIM_LIMIT
    refs = {ref_of(p): p for p in patterns}
    for attempt in range(3):
        now = int(time.time())
        have = of_patterns(staged(repo, remote), remote)
        held = [have[r] for r in refs if _blocking(have.get(r), me, now)]
        if held and attempt > 0:
            raise _held(remote, held, now)
        leases = {r: _expected(have.get(r), me, now) for r in refs}
        pushed = {r: make_commit(repo, run=me.run, clone=me.clone, task=me.task,
                                 pattern=p, at=at, ttl=ttl, lsn=me.lsn,
                                 parent=leases[r] or None, signer=signer)
                  for r, p in refs.items()}
        args = ["push", "--atomic", "--porcelain", "--no-follow-tags", "--recurse-submodules=no"]
        args += [f"--force-with-lease={r}:{leases[r]}" for r in refs]
        args += [remote, *[f"{pushed[r]}:{r}" for r in refs]]
        _code, stdout, stderr = _git(repo, args, deadline)
        seen = porcelain(stdout)
        if not seen:
            raise WalError(f"could not take the claim on {remote}: "
                           f"{stderr or 'the push did not finish in time'}",
                           f"the remote must be reachable to claim across clones "
                           f"(`git ls-remote {remote}`); the local claim was released")
        if all(seen.get(r) is not None and seen[r].status in _OK for r in refs):
            refresh(repo, remote, deadline)  # the others' claims too (best effort)
            with _copy_lock(repo, remote):
                for r in refs:
                    repo.references.create(staged_ref(remote, r), pygit2.Oid(hex=pushed[r]),
                                           force=True)
            return
        if (why := refresh(repo, remote, deadline)) is not None:
            raise WalError(f"{remote} refused the claim and could not be read: {why}",
                           f"`git ls-remote {remote} '{CLAIMS_PREFIX}*'` lists its claims")
    raise WalError(f"the claims on {remote} kept moving: not taken",
                   "claim again (`git wal claim`)")


def _held(remote: str, held: list[RemoteClaim], now: int) -> ClaimHeld:
    c = held[0]
    shown = c.pattern if c.pattern.isprintable() else repr(c.pattern)
    return ClaimHeld(
        f"{shown} is claimed on {remote} by run {c.run} of clone {c.clone} "
        f"(task {c.task!r}) for {max(0, c.at + c.ttl - now)} s more",
        f"coordinate with run {c.run}: it releases the path with `git wal release`, "
        "or the claim expires; `git wal runs` lists the remote's claims")


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
    args = ["push", "--atomic", "--porcelain", "--no-follow-tags", "--recurse-submodules=no"]
    args += [f"--force-with-lease={c.ref}:{c.commit}" for c in mine]
    args += [remote, *[f":{c.ref}" for c in mine]]
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
             "they bind other clones until they expire")


def end_taken_over(repo: pygit2.Repository, remote: str, run: str) -> None:
    """A run taken over here holds no claim of the clone it was taken from:
    its claim refs on ``remote`` deleted, whichever clone took them."""
    deadline = time.monotonic() + CLAIM_LIMIT
    why = refresh(repo, remote, deadline) or drop(repo, remote, run, None, None)
    if why is not None:
        tell(f"warning: the claims of run {run} on {remote} were not deleted ({why}); "
             "they bind other clones until they expire")
