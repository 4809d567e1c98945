"""Claims on a remote, as refs: their name, their blob, and this clone's copy
of them (docs/remote-runs.md, "Claims across clones"; docs/format.md).

A claimed path or glob is the ref ``refs/wal-claims/<sha1 of the pattern>``
on the run's remote. It points at a commit whose tree holds one blob,
``claim.json``, saying who holds it (run, clone, task), since when and for
how long, and a random nonce, so that two identical claims are never one
commit. This clone's copy of the remote's claims is
``refs/wal-remote/<remote>/wal-claims/*``: read here, never acted on unless
trust/authority.py says a key the user trusts signed it.

A claim expires by this clone's watch of the remote, never by comparing
two machines' clocks: when this clone saw the pair (claim commit, holder
run's head on the remote) stay unchanged for ``ttl + SKEW`` seconds of its
own clock, from first sight to its latest copy (claim_seen.py). The holder's
appends and renewals keep it live; ``at`` is data, shown to people. A claim
also ends when its ref is deleted, when the holder's run is gone from the
remote after having been seen there (here), or when its fetched log ended it
(together/remote_claims.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pygit2

from ..base.repository import common_dir
from ..log.packwrite import Signer, commit_data, with_signature
from .claim_seen import Seen, Sightings, load
from .refs import STAGING_PREFIX, staging_prefix
from .replica_state import replica_dir

__all__ = ["CLAIMS_PREFIX", "SKEW", "RemoteClaim", "make_commit", "ref_of", "staged",
           "staged_ref"]

CLAIMS_PREFIX = "refs/wal-claims/"
# seconds added to a claim's ttl before this clone calls it expired: the
# holder's appends reach the remote late (the pusher batches and retries),
# and this clone copies the remote's claims only now and then
SKEW = 120
BLOB = "claim.json"
COPY_LOCK = "claims.lock"  # in <common-dir>/wal/replica/<remote>/ (claim_push.py)
_STAGED_PART = "/wal-claims/"


def ref_of(pattern: str) -> str:
    """The remote ref of ``pattern``: named by the resource, never by a slug."""
    return CLAIMS_PREFIX + hashlib.sha1(pattern.encode("utf-8")).hexdigest()


def staged_ref(remote: str, ref: str) -> str:
    """This clone's copy of the remote's claim ref ``ref``."""
    return f"{staging_prefix(remote)}wal-claims/{ref[len(CLAIMS_PREFIX):]}"


@dataclass(frozen=True)
class RemoteClaim:
    """One claim ref as this clone last saw it on ``remote``."""

    remote: str
    ref: str  # refs/wal-claims/<sha1>
    commit: str
    run: str
    clone: str
    task: str
    nonce: str
    pattern: str
    at: int
    ttl: int
    lsn: int
    seen: Seen | None = None  # this clone's watch of this very commit (claim_seen.py)
    copied: int | None = None  # this clone's clock at its latest copy of the remote's claims

    @property
    def watched(self) -> int:
        """Seconds of this clone's clock it saw the claim and its holder's head
        on the remote unchanged (0 when it has not watched it yet)."""
        if self.seen is None or self.copied is None:
            return 0
        return max(0, self.copied - self.seen.first)

    @property
    def left(self) -> int:
        """Seconds more of watching it unchanged before it expires here."""
        return max(0, self.ttl + SKEW - self.watched)

    @property
    def dropped(self) -> bool:
        """The holder's run was on the remote with this claim, and is gone."""
        return self.seen is not None and self.seen.gone

    def live(self) -> bool:
        """Not expired by this clone's watch, nor dropped (``at`` plays no part)."""
        return not self.dropped and self.left > 0

    def to_dict(self, trusted: bool) -> dict[str, Any]:
        return {"pattern": self.pattern, "run": self.run, "clone": self.clone,
                "task": self.task, "at": self.at, "ttl": self.ttl, "remote": self.remote,
                "trusted": trusted}


def _blob(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def make_commit(repo: pygit2.Repository, *, run: str, clone: str, task: str, pattern: str,
                at: int, ttl: int, lsn: int, parent: str | None,
                signer: Signer | None) -> str:
    """A claim commit for ``pattern`` (its parent: the claim it replaces, so
    the ref only fast-forwards), signed when there is a signer."""
    doc = {"run": run, "clone": clone, "task": task, "nonce": secrets.token_hex(16),
           "pattern": pattern, "at": at, "ttl": ttl, "lsn": lsn}
    blob = repo.create_blob(_blob(doc))
    tb = repo.TreeBuilder()
    tb.insert(BLOB, blob, pygit2.GIT_FILEMODE_BLOB)
    tree = tb.write()
    ident = f"gitwal <claims@gitwal> {at} +0000".encode()
    content = commit_data(str(tree), [parent] if parent else [], ident,
                          f"claim {pattern}\n".encode("utf-8", "surrogateescape"))
    if signer is not None:
        content = with_signature(content, signer.sign(content))
    return str(repo.odb.write(pygit2.GIT_OBJECT_COMMIT, content))


MAX_CLAIM_BYTES = 64 * 1024  # a claim blob read past this is no claim


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read(repo: pygit2.Repository, remote: str, ref: str, commit: str) -> RemoteClaim | None:
    """The claim a commit holds; None when it is not one gitwal wrote (a
    malformed claim is no claim: it binds nobody)."""
    try:
        obj = repo.get(commit)
        if not isinstance(obj, pygit2.Commit):
            return None
        blob = repo[obj.tree[BLOB].id]
        if not isinstance(blob, pygit2.Blob) or blob.size > MAX_CLAIM_BYTES:
            return None  # fetched data: a claim gitwal writes is a few hundred bytes
        doc = json.loads(blob.data)
    except (KeyError, ValueError, TypeError, pygit2.GitError):
        return None
    if not isinstance(doc, dict):
        return None
    texts = [doc.get(k) for k in ("run", "clone", "task", "nonce", "pattern")]
    nums = [_int(doc.get(k)) for k in ("at", "ttl", "lsn")]
    if not all(isinstance(t, str) for t in texts) or None in nums:
        return None
    run, clone, task, nonce, pattern = (str(t) for t in texts)
    at, ttl, lsn = (int(n) for n in nums if n is not None)
    if ref_of(pattern) != ref:
        return None  # a blob moved under another pattern's name
    return RemoteClaim(remote, ref, commit, run, clone, task, nonce, pattern, at, ttl, lsn)


def staged(repo: pygit2.Repository, remote: str | None = None) -> list[RemoteClaim]:
    """Every claim in this clone's copy of ``remote``'s claim refs (of every
    remote when None), live or not, by pattern."""
    if not _copied(repo, remote):
        return []  # the common case: this clone never fetched a remote's claims
    prefix = STAGING_PREFIX if remote is None else staging_prefix(remote)
    out = []
    watched: dict[str, Sightings] = {}
    for name in repo.references:
        if not name.startswith(prefix) or _STAGED_PART not in name:
            continue
        where, _, tail = name[len(STAGING_PREFIX):].rpartition(_STAGED_PART)
        if "/" in tail or not tail or not where:
            continue
        ref = repo.references.get(name)
        if ref is None:
            continue
        claim = read(repo, where, CLAIMS_PREFIX + tail, str(ref.resolve().target))
        if claim is None:
            continue
        if where not in watched:
            watched[where] = load(common_dir(repo), where)
        seen = watched[where].claims.get(claim.ref)
        out.append(replace(claim, seen=seen if seen and seen.commit == claim.commit else None,
                           copied=watched[where].copied))
    return sorted(out, key=lambda c: (c.pattern, c.remote))


def _copied(repo: pygit2.Repository, remote: str | None) -> bool:
    """Has this clone ever written a copy of (``remote``'s) claim refs: the
    lock every writer of the copy takes (claim_push.py) is there. A few stats
    where listing every ref of a clone with many runs takes milliseconds."""
    common = common_dir(repo)
    if remote is not None:
        return (replica_dir(common, remote, create=False) / COPY_LOCK).exists()
    root = common / "wal" / "replica"
    try:
        return any((root / d / COPY_LOCK).exists() for d in os.listdir(root))
    except OSError:
        return False


def of_patterns(claims: Sequence[RemoteClaim], remote: str) -> dict[str, RemoteClaim]:
    """``remote``'s claims by ref."""
    return {c.ref: c for c in claims if c.remote == remote}
