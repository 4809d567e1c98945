"""Signature checks of append commits, for `git wal verify` and server-side hooks.

Each append commit is checked the way ``git verify-commit`` with
``gpg.format=ssh`` checks it: the SSH signature in its ``gpgsig`` header
must verify over the commit's content without that header (so an append
whose records were edited and re-hashed under a kept header fails), and the
signing key must be trusted, for namespace ``git`` at the commit's committer
time, by the allowed-signers file. The reasons are stable text:

* ``append not signed`` (only when signatures are required);
* ``bad signature...`` (malformed, not SSH, wrong namespace, or not matching);
* ``signed by untrusted key SHA256:...``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pygit2

from ..log.segments import Failure, Segment
from ..signing.allowed_signers import AllowedSigner, find_signer, load_allowed
from ..signing.commits import commit_signature
from ..signing.errors import BadSignature
from ..signing.sshsig import verify
from ..signing.sshwire import DEFAULT_NAMESPACE, fingerprint

__all__ = ["NOT_SIGNED", "commit_problem", "signature_failures", "signature_problems"]

NOT_SIGNED = "append not signed"


def signature_problems(repo: pygit2.Repository, commit_ids: Sequence[str],
                       allowed_signers: Path | None,
                       require_signed: bool) -> list[tuple[str, str]]:
    """(commit id, reason) for every commit in ``commit_ids`` whose signature fails.

    With ``allowed_signers`` (an allowed-signers file in git's format) a valid
    signature must also come from a key it trusts; without it, signatures are
    checked for validity only, which says nothing about who signed. Unsigned
    commits are problems only when ``require_signed``. A malformed or missing
    allowed-signers file raises :class:`~gitwal.signing.errors.BadAllowedSigners`
    (fail closed). The order of ``commit_ids`` is kept; an id appears at most once.
    """
    allowed = None if allowed_signers is None else load_allowed(allowed_signers)
    out: list[tuple[str, str]] = []
    for oid in dict.fromkeys(commit_ids):
        reason = commit_problem(repo, oid, allowed, require_signed)
        if reason is not None:
            out.append((oid, reason))
    return out


def commit_problem(repo: pygit2.Repository, oid: str,
                   allowed: Sequence[AllowedSigner] | None, require_signed: bool) -> str | None:
    """Why one commit's signature fails (None: it holds)."""
    try:
        commit = repo.get(oid)
    except ValueError:  # not an object id at all
        commit = None
    if not isinstance(commit, pygit2.Commit):
        return "not a commit in this repository"
    return _problem(commit, allowed, require_signed)


def _problem(commit: pygit2.Commit, allowed: Sequence[AllowedSigner] | None,
             require_signed: bool) -> str | None:
    signature, signed = commit_signature(commit)
    if signature is None or signed is None:
        return NOT_SIGNED if require_signed else None
    try:
        public_key = verify(signature, signed, DEFAULT_NAMESPACE)
    except BadSignature as e:
        return e.message if e.message.startswith("bad signature") else f"bad signature: {e.message}"
    if allowed is None:
        return None
    when = datetime.fromtimestamp(commit.committer.time, UTC)
    if find_signer(allowed, public_key, DEFAULT_NAMESPACE, when) is not None:
        return None
    reason = f"signed by untrusted key {fingerprint(public_key)}"
    if any(e.public_key == public_key for e in allowed):
        # Listed, but not for this namespace or time (valid-before, namespaces=...).
        reason += (f" (its allowed-signers line does not cover namespace {DEFAULT_NAMESPACE} "
                   f"at {when:%Y-%m-%d %H:%M:%S} UTC)")
    return reason


def signature_failures(run: str, segments: Iterable[Segment],
                       allowed: Sequence[AllowedSigner] | None,
                       require_signed: bool) -> list[Failure]:
    """The ``signature`` failures of one run: every append of every segment, once each.

    A failure carries the LSN of the first record its append holds (None when
    the append holds none that could be read) and names the append commit.
    """
    out: list[Failure] = []
    seen: set[str] = set()
    for seg in segments:
        for append in seg.appends:
            if append.oid in seen:
                continue
            seen.add(append.oid)
            reason = _problem(append.commit, allowed, require_signed)
            if reason is not None:
                lsn = min((e.record.lsn for e in append.entries), default=None)
                out.append(Failure(run, "signature", f"append {append.oid[:12]}: {reason}",
                                   lsn))
    return out
