"""Claims: paths a run reserves against other runs' steps.

A claim is a ``claim`` record in the claiming run's log (docs/format.md), so
it is data every run can read and `git wal verify` checks. A run's live
claims are the fold of its claim records: a later claim of a pattern
replaces the earlier one, ``ttl`` 0 releases it, a ``seal`` ends them all, a
dropped run (no ref) has none, and a claim is live only while
``now < at + ttl`` (``now`` is passed in, so expiry is tested without waiting).

Which runs to read: a run writes ``<common git dir>/wal/claims/<run>``
(durably, before its first claim record is appended), so a step reads the
logs of the runs that ever claimed and no other (a clone's runs only: a
fetched log's claims bind nobody here, its steps changed another tree); and
of those, only the appends since the head their cached fold names
(claimfold.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path

import pygit2

from ..base.errors import ToolRefused, WalError
from ..base.ids import RunId, valid_run_id
from ..base.repository import common_dir, worktree_name
from ..log.chain import Chain
from ..log.locks import tell
from ..records.model import Record
from ..records.paths import path_problem
from ..trust.authority import may_act
from .claimfold import Live, fold_into, held_at
from .open_intents import open_step_on
from .pathlocks import Holder, PathBusy, path_locks
from .remote_claims import describe_remote, remote_hits

DEFAULT_TTL = 3600  # seconds a claim lasts when no --ttl is given


def now_s() -> int:
    return int(time.time())


def fold(records: Iterable[Record], now: int) -> list[Live]:
    """The live claims a run's records leave at ``now``, by pattern."""
    return _live(fold_into({}, records), now)


def _live(held: dict[str, Live], now: int) -> list[Live]:
    return sorted((c for c in held.values() if now < c.until), key=lambda c: c.pattern)


def matches(pattern: str, path: str) -> bool:
    """fnmatch rules on the whole tree-relative path (``*`` crosses ``/``)."""
    return pattern == path or fnmatchcase(path, pattern)


def marks(repo: pygit2.Repository) -> Path:
    return common_dir(repo) / "wal" / "claims"


def has_claimed(repo: pygit2.Repository, run: str) -> bool:
    return (marks(repo) / run).exists()


def run_claims(repo: pygit2.Repository, run: str, now: int) -> list[Live]:
    """``run``'s live claims (none when it never claimed, was dropped, or its
    log cannot be read: a damaged log is reported by its own commands)."""
    if not valid_run_id(run) or not has_claimed(repo, run):
        return []
    return _claims_of(repo, run, now)


def _claims_of(repo: pygit2.Repository, run: str, now: int) -> list[Live]:
    """run_claims for a ``run`` known to have claimed (its marker was listed)."""
    chain = Chain(repo, RunId(run))
    try:
        head = chain.head()
        if head is None:
            return []
        # cached per head (claimfold.py); a claim binds only with authority here
        return _live(held_at(repo, chain, head, lambda c: may_act(repo, c)), now)
    except WalError:
        return []


def claimed_elsewhere(repo: pygit2.Repository, me: str, paths: Sequence[str],
                      now: int) -> list[tuple[Live, str]]:
    """Other runs' live claims (of this worktree) matching one of ``paths``,
    each run with the first path one of its claims matches."""
    out: dict[str, tuple[Live, str]] = {}
    for hit in claims_on(repo, me, paths, now):
        out.setdefault(hit[0].run, hit)
    return list(out.values())


def claims_on(repo: pygit2.Repository, me: str, paths: Sequence[str],
              now: int) -> list[tuple[Live, str]]:
    """Every (live claim, path it matches) of other runs of this worktree, by run."""
    d = marks(repo)
    if not d.is_dir() or not paths:
        return []  # the common case: no run ever claimed (one stat)
    here = worktree_name(repo)
    out = []
    for name in sorted(os.listdir(d)):
        if name == me:
            continue
        if not valid_run_id(name):
            continue  # not a marker gitwal wrote
        hits = [(c, p) for c in _claims_of(repo, name, now) for p in paths
                if matches(c.pattern, p)]
        if hits and _same_tree(repo, name, here):
            out += hits
    return out


def _same_tree(repo: pygit2.Repository, run: str, here: str) -> bool:
    chain = Chain(repo, RunId(run))
    head = chain.head()
    if head is None:
        return False
    bound = chain.root_plan(head).worktree
    return bound is None or bound[0] == here


def claims_mode(repo: pygit2.Repository) -> str:
    """``git config wal.claims``: ``refuse`` (default) or ``warn``."""
    try:
        value = str(repo.config["wal.claims"])
    except KeyError:
        return "refuse"
    if value not in ("refuse", "warn"):
        raise WalError(f"wal.claims is {value!r}, not 'refuse' or 'warn'",
                       "fix it with `git config wal.claims refuse` (or warn)")
    return value


def describe(claim: Live, path: str, now: int) -> str:
    shown = path if path.isprintable() else repr(path)
    pattern = "" if claim.pattern == path else f" (by {claim.pattern!r})"
    return (f"{shown} is claimed by run {claim.run}{pattern}, LSN {claim.lsn}, "
            f"for {claim.until - now} s more")


def keep_off_claims(repo: pygit2.Repository, me: str, paths: Sequence[str],
                    now: int | None = None) -> None:
    """Refuse (:class:`PathBusy`) a step of ``me`` on a path another run claims;
    with ``wal.claims warn``, say so on stderr and let it go on."""
    t = now_s() if now is None else now
    found = claimed_elsewhere(repo, me, paths, t)
    if not found:
        _keep_off_remote(repo, paths)
        return
    claim, path = found[0]
    message = describe(claim, path, t)
    if claims_mode(repo) == "warn":
        tell(f"warning: {message} (wal.claims is warn: the step goes on)")
        return
    raise PathBusy(message, f"coordinate with run {claim.run}: it releases the path with "
                   f"`git wal release --run {claim.run}`, or the claim expires; "
                   "`git wal runs` lists the claims")


def _keep_off_remote(repo: pygit2.Repository, paths: Sequence[str]) -> None:
    """Refuse a step on a path another clone's run claims on a remote, when a
    key the user trusts signed that claim; warn when none did (remote_claims.py:
    whether a remote claim still holds is this clone's watch of the remote,
    never a time compared with its clock)."""
    hits = remote_hits(repo, paths, matches)
    if not hits:
        return
    hit = hits[0]
    message = describe_remote(hit)
    if not hit.binds or claims_mode(repo) == "warn":
        why = ("wal.claims is warn" if hit.binds else
               "no key you trust signed the claim, so it does not bind here")
        tell(f"warning: {message} ({why}: the step goes on)")
        return
    raise PathBusy(message, f"coordinate with run {hit.claim.run}: it releases the path with "
                   "`git wal release`, or the claim expires; `git wal runs` lists the "
                   "remote's claims")


@contextmanager
def kept_off_others(repo: pygit2.Repository, holder: Holder,
                    paths: Sequence[str]) -> Iterator[None]:
    """Hold ``paths`` against every other run's step while the block runs: their
    path locks (pathlocks.py), taken or refused; then refused (PathBusy,
    nothing appended) when another run's open agent intent names one of them
    (open_intents.py: an agent's step spans two hooks, so no lock spans it) or
    another run claims one. One mechanism for CLI, library and agent steps."""
    with path_locks(repo, paths, holder):
        other = open_step_on(repo, RunId(holder.run), paths, lambda i: may_act(repo, i))
        if other is not None:
            raise other.refusal()
        keep_off_claims(repo, holder.run, paths)
        yield


def check_patterns(paths: Sequence[str]) -> tuple[str, ...]:
    if not paths:
        raise ToolRefused("name at least one path or pattern", "git wal claim src/a.py 'docs/*'")
    for p in paths:
        if why := path_problem(p):
            raise ToolRefused(f"cannot claim {p!r}: {why}",
                              "name paths relative to the top of the working tree")
    if len(set(paths)) != len(paths):
        raise ToolRefused("a path is named twice")
    return tuple(paths)


def overlaps(repo: pygit2.Repository, me: str, patterns: Sequence[str],
             now: int) -> list[tuple[Live, str]]:
    """Other runs' live claims that one of ``patterns`` matches or is matched by."""
    d = marks(repo)
    if not d.is_dir():
        return []
    out = []
    for name in sorted(os.listdir(d)):
        if name == me:
            continue
        for c in run_claims(repo, name, now):
            for p in patterns:
                if matches(c.pattern, p) or matches(p, c.pattern):
                    out.append((c, p))
                    break
    return out


__all__ = ["DEFAULT_TTL", "Live", "check_patterns", "claimed_elsewhere", "claims_mode",
           "claims_on", "fold", "keep_off_claims", "marks", "matches", "overlaps", "run_claims"]
