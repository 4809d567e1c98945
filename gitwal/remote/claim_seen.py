"""What this clone saw of a remote's claims, and when by its own clock
(docs/remote-runs.md, "Claims across clones"; docs/format.md, "Claim
sightings"): the file ``<common-dir>/wal/replica/<remote>/claims.seen``.

Each copy of the remote's claim refs (claim_push.refresh) also learns the
head of each holder run's live log on the remote, and records here, for
every claim ref: the claim commit, that head (None: the remote has no log of
the run), when this clone first saw that pair, and whether the run's log
was seen there with this claim and is gone since (dropped); and, once for
the remote, when this clone last copied its claims successfully.

A claim is expired when this clone watched its pair stay unchanged for at
least ``ttl + SKEW`` seconds, from first sight to the latest copy: both
times are this clone's clock, so no two machines' clocks are ever compared.
A copy dated before a claim's first sight (the clock went back) starts its
watch again.
The holder's appends (its head moving on the remote) and its renewals (a new
claim commit) make a new pair, watched from the start again. A claim this
file does not know (a copy not recorded yet) is live.

Written durably (base/durable.py), by the copier only, under the copy lock
(claim_push.py); read without a lock (a rename replaces it whole). A file
that is missing or damaged knows nothing: every claim is watched afresh.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..base.durable import atomic_write
from .replica_state import replica_dir

__all__ = ["SEEN_FILE", "Seen", "Sightings", "load", "observe"]

SEEN_FILE = "claims.seen"
VERSION = 1


@dataclass(frozen=True)
class Seen:
    """One claim ref as this clone watched it."""

    commit: str  # the claim commit
    head: str | None  # the holder run's head on the remote with it (None: no log there)
    first: int  # this clone's clock when it first saw (commit, head)
    gone: bool = False  # the run's log was there with this claim, and is no more


@dataclass(frozen=True)
class Sightings:
    copied: int | None  # this clone's clock at its latest successful copy
    claims: Mapping[str, Seen]  # by claim ref


NOTHING = Sightings(None, {})


def _oid(value: object) -> str | None:
    return value if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40}", value) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _path(common: Path, remote: str, create: bool) -> Path:
    return replica_dir(common, remote, create) / SEEN_FILE


def load(common: Path, remote: str) -> Sightings:
    """What this clone recorded of ``remote``'s claims (nothing when the file
    is missing or damaged: a claim not known is live)."""
    try:
        raw = json.loads(_path(common, remote, False).read_bytes())
    except (OSError, ValueError):
        return NOTHING
    if not isinstance(raw, dict) or raw.get("v") != VERSION or not isinstance(
            raw.get("claims"), dict):
        return NOTHING
    out = {}
    for ref, doc in raw["claims"].items():
        if not isinstance(doc, dict):
            continue
        commit, first = _oid(doc.get("commit")), _int(doc.get("first"))
        if commit is None or first is None:
            continue
        out[str(ref)] = Seen(commit, _oid(doc.get("head")), first, doc.get("gone") is True)
    return Sightings(_int(raw.get("copied")), out)


def _next(prev: Seen | None, commit: str, head: str | None, now: int) -> Seen:
    if prev is None or prev.commit != commit or now < prev.first:
        # A new claim, or a renewal: watched afresh. So is a claim copied at a
        # time before its first sight (this clock was set back): the watch
        # starts again, never shortened by the jump.
        return Seen(commit, head, now)
    gone = prev.gone or (head is None and prev.head is not None)
    if gone:
        return Seen(commit, None, prev.first, True)  # dropped: it stays so
    return prev if prev.head == head else Seen(commit, head, now)  # an append: afresh


def observe(common: Path, remote: str, now: int,
            found: Mapping[str, tuple[str, str | None]]) -> Sightings:
    """Record one successful copy at ``now`` (this clone's clock): ``found``
    maps each claim ref on the remote to (its commit, the holder run's head
    there or None). The caller holds the copy lock."""
    old = load(common, remote)
    claims = {ref: _next(old.claims.get(ref), commit, head, now)
              for ref, (commit, head) in sorted(found.items())}
    body = {"v": VERSION, "copied": now, "claims": {
        ref: {"commit": s.commit, "head": s.head, "first": s.first, "gone": s.gone}
        for ref, s in claims.items()}}
    atomic_write(_path(common, remote, True),
                 json.dumps(body, sort_keys=True).encode() + b"\n", tag="seen")
    return Sightings(now, claims)
