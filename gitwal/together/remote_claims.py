"""Other clones' claims, as this clone last fetched them from a remote
(remote/claim_refs.py): which of them bear on a step here, whether they
still hold, and whether they bind it (docs/remote-runs.md, "Claims across
clones").

A remote claim holds while this clone's watch has not expired it
(remote/claim_seen.py: the holder idle on the remote for ``ttl + SKEW`` of
this clone's clock), its holder's run was not dropped from the remote, and
that run's log, as this clone last fetched it, did not end it: released
the pattern, sealed, or was taken over after the claim (claimfold.py's fold,
the one that ends this clone's own claims). That log is data: read to END a
claim earlier, never to make one hold or bind.

A remote claim binds this clone's steps only when a key the user trusts
signed its commit (trust/authority.py, the one authority check); any other
is data: its holder is named in a warning, and the step goes on. Claims of
this clone's own runs are not read here: the claim records in their logs
already hold them (claims.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pygit2

from ..base.errors import WalError
from ..base.ids import CommitId, RunId, valid_run_id
from ..base.repository import common_dir
from ..log.authorship import clone_id
from ..log.chain import Chain
from ..log.locks import tell
from ..remote.claim_push import idle
from ..remote.claim_refs import RemoteClaim, staged
from ..remote.replica_state import replica_dir
from ..trust.authority import claim_ref_binds
from .claimfold import held_at

__all__ = ["Hit", "describe_remote", "ended_in_log", "holds", "live_remote_claims",
           "remote_hits", "tell_shell_hits"]

FOLD_DIR = "claims.fold"  # in <common-dir>/wal/replica/<remote>/: the fetched runs' folds


@dataclass(frozen=True)
class Hit:
    claim: RemoteClaim
    path: str
    binds: bool  # signed by a key the user trusts


def ended_in_log(repo: pygit2.Repository, c: RemoteClaim) -> bool:
    """The holder's log, at the head this clone last saw on the remote, ended
    the claim: it reached the claim's LSN and no longer holds its pattern
    (a release, a seal or a takeover after it). False whenever that cannot
    be told: no head seen, a log not there yet or unreadable."""
    if c.seen is None or c.seen.head is None or not valid_run_id(c.run):
        return False
    chain = Chain(repo, RunId(c.run))
    head = CommitId(c.seen.head)
    cache = replica_dir(common_dir(repo), c.remote, create=False) / FOLD_DIR / c.run
    try:
        newest = chain.head_records(head)
        if not newest or newest[-1].lsn < c.lsn:
            return False  # the claim record has not reached the remote yet
        return c.pattern not in held_at(repo, chain, head, cache=cache)
    except (WalError, KeyError, ValueError, pygit2.GitError):
        return False  # a log that cannot be read ends nothing


def holds(repo: pygit2.Repository, c: RemoteClaim) -> bool:
    """Not expired by this clone's watch, not dropped, not ended by its run's log."""
    return c.live() and not ended_in_log(repo, c)


def live_remote_claims(repo: pygit2.Repository) -> list[tuple[RemoteClaim, bool]]:
    """Every claim that holds in this clone's copy of its remotes' claims,
    and whether it binds here."""
    return [(c, claim_ref_binds(repo, c.commit)) for c in staged(repo) if holds(repo, c)]


def remote_hits(repo: pygit2.Repository, paths: Sequence[str],
                matches: Callable[[str, str], bool]) -> list[Hit]:
    """Other clones' claims that hold and match one of ``paths``: one per claim."""
    if not paths:
        return []
    found = staged(repo)
    if not found:
        return []  # the common case: no remote claim was ever fetched
    me = clone_id(repo)
    out = []
    for c in found:
        if c.clone == me or not c.live():
            continue
        path = next((p for p in paths if matches(c.pattern, p)), None)
        if path is not None and not ended_in_log(repo, c):
            out.append(Hit(c, path, claim_ref_binds(repo, c.commit)))
    return sorted(out, key=lambda h: not h.binds)


def describe_remote(hit: Hit) -> str:
    c = hit.claim
    shown = hit.path if hit.path.isprintable() else repr(hit.path)
    pattern = "" if c.pattern == hit.path else f" (by {c.pattern!r})"
    return (f"{shown} is claimed on {c.remote} by run {c.run} of clone {c.clone} "
            f"(task {c.task!r}){pattern}; {idle(c)}")


def tell_shell_hits(repo: pygit2.Repository, run: str, lsn: int, paths: Sequence[str],
                    matches: Callable[[str, str], bool]) -> list[Hit]:
    """A shell step's closing meets other clones' claims: its paths are known
    only then, so it is not refused but told, on stderr, one warning per claim
    its own changed ``paths`` hit. Not recorded in the closing's ``claimed``:
    that names claim records `git wal verify` checks in the claiming run's
    log, which a clone need not have; a claim ref is no record."""
    hits = remote_hits(repo, paths, matches)
    for hit in hits:
        why = ("a key you trust signed it" if hit.binds else
               "unsigned or untrusted: it warns only")
        tell(f"warning: shell step LSN {lsn} of run {run} changed a claimed path: "
             f"{describe_remote(hit)} ({why}); coordinate with run {hit.claim.run}")
    return hits
