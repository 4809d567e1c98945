"""`git wal claim` and `git wal release`: a run's claim records appended
(docs/agents-together.md, "Claims"). What claims mean for other runs' steps,
and the fold that reads them, is claims.py's: this module is the one that
needs a :class:`~gitwal.run.Run`, so claims.py stays below run.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base.durable import atomic_write, makedirs_durable
from ..base.errors import ToolRefused, WalError
from ..base.seconds import MAX_SECONDS
from ..log.authorship import clone_id
from ..records.model import Claim
from ..remote.claim_push import Holder, drop_remote, take
from ..remote.replica_state import remote_of
from ..run import Run
from ..together.claims import DEFAULT_TTL, Live, check_patterns, marks, now_s, overlaps, run_claims
from ..together.remote_claims import ended_in_log

__all__ = ["claim", "release"]


def claim(run: Run, paths: Sequence[str], ttl: int = DEFAULT_TTL,
          now: int | None = None) -> tuple[Claim, list[tuple[Live, str]]]:
    """Append a claim of ``paths`` for ``ttl`` seconds (refused while an intent
    of the run is open: nothing may follow it but its approval). Returns the
    record and the other runs' live claims it overlaps (reported, not refused)."""
    pats = check_patterns(paths)
    if not 0 < ttl <= MAX_SECONDS:
        raise ToolRefused(f"--ttl must be a number of seconds from 1 to {MAX_SECONDS} "
                          f"(a year), not {ttl}", "release a claim with `git wal release`; "
                          "claim again to extend one")
    t = now_s() if now is None else now
    repo = run.store.repo
    held = {c.pattern for c in run_claims(repo, run.id, t)}
    rec = _append(run, pats, ttl, t)
    if (remote := remote_of(repo, run.id)) is not None:
        head = run.store.head()
        assert head is not None  # the claim record was just appended
        task = run.store.root_plan(head).task
        try:
            take(repo, remote, Holder(run.id, clone_id(repo), task, rec.lsn), pats, t, ttl,
                 run.store.signer, ended=lambda c: ended_in_log(repo, c))
        except WalError:
            # not taken on the remote: not held here either (what the run held
            # before stays held; the remote keeps its claims of them too)
            if fresh := tuple(p for p in pats if p not in held):
                _append(run, fresh, 0, t)
            raise
    return rec, overlaps(repo, run.id, pats, t)


def release(run: Run, paths: Sequence[str] = (), now: int | None = None) -> Claim | None:
    """Release ``paths`` (default: every live claim of the run); None when
    there was nothing to release."""
    t = now_s() if now is None else now
    repo = run.store.repo
    live = {c.pattern for c in run_claims(run.store.repo, run.id, t)}
    pats = check_patterns(paths) if paths else tuple(sorted(live))
    pats = tuple(p for p in pats if p in live)
    if not pats:
        return None
    rec = _append(run, pats, 0, t)
    drop_remote(repo, run.id, None if not paths else pats)
    return rec


def _append(run: Run, pats: tuple[str, ...], ttl: int, now: int) -> Claim:
    with run.store.locked():
        head, lsn = run.next_record()
        d = marks(run.store.repo)
        if not d.is_dir():
            makedirs_durable(d)
        if not (d / run.id).exists():
            atomic_write(d / run.id, b"", tag="claim")
        rec = Claim(run.id, lsn, pats, now, ttl)
        run.store.append([rec], [], head)
    return rec
