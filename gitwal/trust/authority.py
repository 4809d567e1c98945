"""What a record may authorize here: the one authority check (docs/security.md,
"Authority: what a record may make gitwal do").

A log is data. A record acts here (its command run, its images written into
the tree, a step approved, a step of this clone refused, a rollback switched
off) only when it has authority:

* **this clone** wrote it: its ``auth`` MAC verifies under this clone's secret
  (log/authorship.py, the primitive); or
* a **trusted signer** signed the append commit that holds it: the commit's SSH
  signature verifies and its key is in the user's allowed-signers file
  (signing/), for the callers that know the append (``append=``).

Anything else (a fetched run, another clone's record appended to this clone's
own pushed run, a record written with git plumbing, a log from before the MAC)
is **data**: shown and verified, never acted on. :data:`AUTHORIZES` says, for
every record type, what it may authorize; a type missing from it is a test
failure (tests/test_authority.py), so no new type acts unclassified.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pygit2

from ..base.errors import WalError
from ..base.ids import CommitId
from ..log.authorship import written_here
from ..log.chain import Chain
from ..records.model import (
    Abort,
    Approval,
    Checkpoint,
    Claim,
    Commit,
    Intent,
    Plan,
    Record,
    Seal,
    Takeover,
    Unlogged,
    type_name,
)
from ..signing.allowed_signers import AllowedSigner, load_allowed

__all__ = ["AUTHORIZES", "NoAuthority", "Origin", "Waiting", "claim_ref_binds", "may_act",
           "origin", "require",
           "require_steps", "waiting"]

DATA_ONLY = ""

# Record type -> what it may authorize when it has authority ("": nothing, it
# is data wherever it comes from). docs/security.md draws the same table.
AUTHORIZES: dict[type[Record], str] = {
    Plan: DATA_ONLY,  # names a task, base and worktree; binds nothing
    Intent: "run its command, check or confirm probe; write its pre- or post-images "
            "(recover --redo/--restore, undo, redo); while open, keep other runs' "
            "steps off its targets and their rollback off the paths it changes",
    Commit: "close its intent as applied: a step undo and redo may act on; a person's "
            "decision (decided_by)",
    Abort: "close its intent as not applied; a person's decision (decided_by)",
    Checkpoint: DATA_ONLY,  # an ordinary commit: verified, never acted on
    Unlogged: DATA_ONLY,  # says what was seen; explains nothing as verified
    Seal: DATA_ONLY,  # ends the run; checked by its signature (seal.py)
    Approval: "run the waiting irreversible intent it names, once",
    Claim: "refuse (or warn about) other runs' steps on its paths",
    Takeover: DATA_ONLY,  # names the clone a run went on in; a fence is observed, not read
}


class Origin(StrEnum):
    HERE = "this clone"
    SIGNED = "a trusted signer"
    DATA = "data only"


class NoAuthority(WalError):
    """A record would act here, and neither this clone wrote it nor a key the
    user trusts signed it."""


def _allowed(repo: pygit2.Repository) -> Sequence[AllowedSigner] | None:
    """The user's allowed signers, or None when there is no such file (or it
    cannot be read: then nobody is trusted, fail closed)."""
    # Imported here: signature checks load cryptography, which a command that
    # never meets an approval (status, log, show) must not pay for.
    from ..signing.trust import allowed_signers_file

    path = allowed_signers_file(repo).path
    key = (repo.path, str(path))
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    cached = _ALLOWED.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        allowed: Sequence[AllowedSigner] | None = load_allowed(Path(path))
    except WalError:
        allowed = None
    _ALLOWED[key] = (stamp, allowed)
    return allowed


_ALLOWED: dict[tuple[str, str], tuple[tuple[int, int, int], Sequence[AllowedSigner] | None]] = {}


def origin(repo: pygit2.Repository, record: Record, append: str | None = None) -> Origin:
    """Who stands behind ``record``: this clone, a trusted signer of its append
    commit ``append`` (when given), or nobody (data)."""
    if not AUTHORIZES.get(type(record)):
        return Origin.DATA  # a type that authorizes nothing is data from anyone
    if written_here(repo, record):
        return Origin.HERE
    if append is not None and _trusted_commit(repo, append):
        return Origin.SIGNED
    return Origin.DATA


def _trusted_commit(repo: pygit2.Repository, commit: str) -> bool:
    """``commit`` is signed by a key in the user's allowed signers."""
    from .signatures import commit_problem  # cryptography: see _allowed

    allowed = _allowed(repo)
    return bool(allowed) and commit_problem(repo, commit, allowed, require_signed=True) is None


def claim_ref_binds(repo: pygit2.Repository, commit: str) -> bool:
    """A claim another clone took on a remote (remote/claim_refs.py) may refuse
    this clone's steps only when a key the user trusts signed its commit;
    unsigned or untrusted, it is data: its holder is warned about, never obeyed."""
    return _trusted_commit(repo, commit)


def may_act(repo: pygit2.Repository, record: Record, append: str | None = None) -> bool:
    """True when ``record`` may authorize what :data:`AUTHORIZES` says here."""
    return origin(repo, record, append) is not Origin.DATA


def describe(record: Record) -> str:
    return f"run {record.run} LSN {record.lsn} ({type_name(record)})"


def require(repo: pygit2.Repository, record: Record, doing: str,
            append: str | None = None) -> None:
    """Raise :class:`NoAuthority` unless ``record`` may authorize ``doing``."""
    if may_act(repo, record, append):
        return
    raise NoAuthority(
        f"{describe(record)} was not written in this clone nor signed by a key you "
        f"trust (a fetched log, another clone's record, or one written by hand): "
        f"it is data here, so gitwal does not {doing}",
        f"read it with `git wal show {record.lsn} --run {record.run}`; if you trust it, "
        "do the step yourself (or trust the signer's key: `git wal trust add`)",
    )


def require_steps(repo: pygit2.Repository, records: Sequence[Record], lsns: Sequence[int],
                  doing: str) -> None:
    """Raise :class:`NoAuthority` unless each committed step ``lsns`` of
    ``records`` (its intent, which holds the images, and the commit that says
    it landed) may be acted on here: checked per step, so a step another
    clone appended to this clone's own run is refused like a fetched run's."""
    wanted = set(lsns)
    for rec in records:
        step = rec.lsn if isinstance(rec, Intent) else rec.intent if isinstance(
            rec, Commit) else None
        if step in wanted:
            require(repo, rec, doing.format(lsn=step))


@dataclass(frozen=True)
class Waiting:
    """The open intent at a log's end and the approvals that follow it."""

    intent: Intent
    approved: Approval | None  # the oldest approval with authority here
    data: tuple[Approval, ...]  # approvals without it: shown, never acted on


def waiting(repo: pygit2.Repository, chain: Chain, head: CommitId | None) -> Waiting | None:
    """The open intent at the end of ``chain`` (the newest record, or followed
    only by approvals of it) and which of its approvals may run it here: one
    this clone wrote, or one whose append a trusted key signed. Reads the
    appends from ``head`` back to the intent (usually one or two)."""
    found: list[tuple[Approval, CommitId]] = []
    at = head
    while at is not None:
        for rec in reversed(chain.head_records(at)):
            if isinstance(rec, Approval):
                found.append((rec, at))
                continue
            if not isinstance(rec, Intent):
                return None
            mine = [(a, c) for a, c in reversed(found) if a.intent == rec.lsn]
            good = next((a for a, c in mine if may_act(repo, a, c)), None)
            return Waiting(rec, good, tuple(a for a, _c in mine if a is not good))
        at = chain.parent(at)
    return None
