"""A run's claims: the fold of its ``claim`` and ``seal`` records, cached per
head (claims.py says what a claim is; docs/agents-together.md, "Claims").

Every step of every other run asks which paths a claiming run holds, so
reading that run's whole log at every step would cost the length of its log.
The fold (pattern -> claim, expiry not yet applied: that needs ``now``) is
kept in ``<common git dir>/wal/claims.fold/<run>`` with the head it was
folded at. A reader whose run has appended since reads only the appends
after that head; if the walk never meets it (the chain was rewritten:
`git wal compact`), the whole chain is folded again.

The file is a copy of what the log says and nothing more: it is rebuilt
from the log when it is missing, torn or unreadable, and written with a
rename, not synced (durable.replace_cache). A reader trusts it only for the
head it names, which the chain it reads must pass through.

The same fold reads another clone's run as this clone last fetched it from
a remote (remote_claims.py), with a cache file of its own: there it only
tells that a claim ended, never that one binds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..base.durable import replace_cache
from ..base.ids import CommitId
from ..base.repository import common_dir
from ..log.chain import Chain
from ..records.model import Claim, Record, Seal, Takeover


@dataclass(frozen=True)
class Live:
    """One claim: the pattern, the record that made it, when it ends."""

    run: str
    pattern: str
    lsn: int
    until: int  # Unix seconds


FOLD_VERSION = 2  # 2: only claims with authority here are folded in
Held = dict[str, Live]  # pattern -> the claim that holds it, live or expired


Admit = Callable[[Claim], bool]


def fold_into(held: Held, records: Iterable[Record], admit: Admit = lambda _c: True) -> Held:
    """``held`` after ``records`` (oldest first): a later claim of a pattern
    replaces it, ttl 0 releases it, a seal or a takeover ends every claim. A claim ``admit``
    refuses (one without authority here: claims.py asks trust/authority.py)
    is data and changes nothing."""
    for rec in records:
        if isinstance(rec, Claim) and not admit(rec):
            continue
        if isinstance(rec, Claim):
            for p in rec.paths:
                if rec.ttl == 0:
                    held.pop(p, None)
                else:
                    held[p] = Live(rec.run, p, rec.lsn, rec.at + rec.ttl)
        elif isinstance(rec, Seal | Takeover):  # a run taken over claims anew there
            held.clear()
    return held


def _cache(repo: pygit2.Repository, run: str) -> Path:
    return common_dir(repo) / "wal" / "claims.fold" / run


def _read(path: Path, run: str) -> tuple[str | None, Held]:
    try:
        data = json.loads(path.read_bytes())
        if data.get("v") != FOLD_VERSION:
            return None, {}  # folded before claims needed authority: fold again
        held = {str(p): Live(run, str(p), int(lsn), int(until)) for p, lsn, until in data["held"]}
        return str(data["head"]), held
    except (OSError, ValueError, KeyError, TypeError):
        return None, {}  # missing, torn or not ours: fold from the log


def held_at(repo: pygit2.Repository, chain: Chain, head: CommitId,
            admit: Admit = lambda _c: True, cache: Path | None = None) -> Held:
    """The claims of ``chain``'s run as of ``head`` (expired ones included),
    of the claim records ``admit`` accepts (the same predicate every call
    with one ``cache``: the cache does not tell two apart). ``cache``: the
    file kept, by default ``claims.fold/<run>``."""
    path = _cache(repo, str(chain.run)) if cache is None else cache
    key = (repo.path, str(path))
    known = _HELD.get(key)
    if known is not None and known[0] == head:
        return dict(known[1])  # this process folded this head already
    cached, held = _read(path, str(chain.run))
    if cached == head:
        _HELD[key] = (head, dict(held))
        return held
    newer: list[list[Record]] = []
    for commit, records in chain.appends(head):
        if str(commit.id) == cached:
            break
        newer.append(records)
    else:
        held = {}  # the cached head is not on this chain: fold all of it
    held = fold_into(held, (r for records in reversed(newer) for r in records), admit)
    body = {"v": FOLD_VERSION, "head": head,
            "held": [[c.pattern, c.lsn, c.until] for c in held.values()]}
    replace_cache(path, json.dumps(body).encode())
    _HELD[key] = (head, dict(held))
    return held


# (repository, cache file) -> (head, its fold): the file's content, kept by the process.
_HELD: dict[tuple[str, str], tuple[str, Held]] = {}
