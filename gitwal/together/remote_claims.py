"""Other clones' claims, as this clone last fetched them from a remote
(remote/claim_refs.py): which of them bear on a step here, and whether they
bind it (docs/remote-runs.md, "Claims across clones").

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

from ..log.authorship import clone_id
from ..remote.claim_refs import RemoteClaim, staged
from ..trust.authority import claim_ref_binds

__all__ = ["Hit", "describe_remote", "live_remote_claims", "remote_hits"]


@dataclass(frozen=True)
class Hit:
    claim: RemoteClaim
    path: str
    binds: bool  # signed by a key the user trusts


def live_remote_claims(repo: pygit2.Repository, now: int) -> list[tuple[RemoteClaim, bool]]:
    """Every live claim in this clone's copy of its remotes' claims, and
    whether it binds here."""
    return [(c, claim_ref_binds(repo, c.commit)) for c in staged(repo) if c.live(now)]


def remote_hits(repo: pygit2.Repository, paths: Sequence[str], now: int,
                matches: Callable[[str, str], bool]) -> list[Hit]:
    """Other clones' live remote claims matching one of ``paths``: one per claim."""
    if not paths:
        return []
    found = staged(repo)
    if not found:
        return []  # the common case: no remote claim was ever fetched
    me = clone_id(repo)
    out = []
    for c in found:
        if c.clone == me or not c.live(now):
            continue
        path = next((p for p in paths if matches(c.pattern, p)), None)
        if path is not None:
            out.append(Hit(c, path, claim_ref_binds(repo, c.commit)))
    return sorted(out, key=lambda h: not h.binds)


def describe_remote(hit: Hit, now: int) -> str:
    c = hit.claim
    shown = hit.path if hit.path.isprintable() else repr(hit.path)
    pattern = "" if c.pattern == hit.path else f" (by {c.pattern!r})"
    return (f"{shown} is claimed on {c.remote} by run {c.run} of clone {c.clone} "
            f"(task {c.task!r}){pattern}, for {max(0, c.at + c.ttl - now)} s more")

