"""Signed git commits: what ``git commit -S`` writes with ``gpg.format=ssh``.

An append commit gitwal signs is checked by plain ``git verify-commit`` and
``git log --format=%G?``, and a commit git signed is checked here
(docs/security.md). The pieces: signing/keys.py (the private key), signing/sshsig.py (the
signature format), signing/allowed_signers.py (which keys are trusted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import pygit2

from .allowed_signers import AllowedSigner, find_signer
from .errors import BadSignature, SigningError, UntrustedSigner
from .sshsig import sign, verify
from .sshwire import DEFAULT_NAMESPACE, ED25519, fingerprint

if TYPE_CHECKING:
    from .keys import SigningKey

__all__ = ["VerifiedSignature", "commit_signature", "create_signed_commit",
           "sign_commit_buffer", "verify_commit"]

_COMMIT_SIG_FIELD = "gpgsig"  # SHA-1 repositories; git uses gpgsig-sha256 in SHA-256 ones


@dataclass(frozen=True)
class VerifiedSignature:
    """A commit signature that verified and whose key the allowed-signers file trusts."""

    principal: str
    fingerprint: str  # SHA256:..., as ssh-keygen and git print it
    key_type: str
    public_key: bytes


def _has_signature_header(content: bytes) -> bool:
    header = content.split(b"\n\n", 1)[0]
    return any(line.startswith((b"gpgsig ", b"gpgsig-sha256 "))
               for line in header.split(b"\n"))


def sign_commit_buffer(key: SigningKey, commit_content: bytes) -> str:
    """The armored signature git would store for this raw (unsigned) commit object.

    git signs the commit object's content exactly, without any ``gpgsig``
    header, with namespace ``git``.
    """
    if _has_signature_header(commit_content):
        raise SigningError("the commit content carries a signature header already",
                           "sign the content without its gpgsig header")
    return sign(key, commit_content, DEFAULT_NAMESPACE)


def _oid(value: pygit2.Oid | str) -> pygit2.Oid:
    return value if isinstance(value, pygit2.Oid) else pygit2.Oid(hex=value)


def commit_signature(commit: pygit2.Commit) -> tuple[bytes | None, bytes | None]:
    """(armored signature, the content it signs); (None, None) for an unsigned commit."""
    # pygit2's stub says tuple[bytes, bytes]; unsigned commits give (None, None)
    return cast("tuple[bytes | None, bytes | None]", commit.gpg_signature)


def create_signed_commit(
    repo: pygit2.Repository,
    key: SigningKey,
    tree: pygit2.Oid | str,
    parents: Sequence[pygit2.Oid | str],
    author: pygit2.Signature,
    committer: pygit2.Signature,
    message: str | bytes,
) -> pygit2.Oid:
    """Write a commit signed the way ``git commit -S`` with ``gpg.format=ssh`` signs it.

    Moves no ref (like ``repo.create_commit(None, ...)``): the caller does.
    The message must be UTF-8: pygit2 hands the unsigned commit back as a
    ``str`` and would silently replace undecodable bytes.
    """
    if isinstance(message, bytes):
        try:
            message = message.decode("utf-8")
        except UnicodeDecodeError:
            raise SigningError("a signed commit's message must be UTF-8",
                               "re-encode the message as UTF-8") from None
    # pygit2's stub says this returns an Oid; it returns the commit object as str
    content: object = repo.create_commit_string(
        author, committer, message, _oid(tree), [_oid(p) for p in parents]
    )
    if not isinstance(content, str):
        raise SigningError(f"pygit2 returned a {type(content).__name__} for the commit content",
                           "this pygit2 version is not supported for signed commits")
    raw = content.encode("utf-8")
    signature = sign_commit_buffer(key, raw)
    # libgit2 turns every "\n" of the signature into "\n " in the header, so
    # a trailing newline would leave a line holding one space; git writes none.
    oid = repo.create_commit_with_signature(content, signature.rstrip("\n"), _COMMIT_SIG_FIELD)
    commit = repo[oid]
    assert isinstance(commit, pygit2.Commit)
    if commit_signature(commit)[1] != raw:  # what git will check is what we signed
        raise SigningError(f"commit {str(oid)[:12]}: the stored content differs from the "
                           "signed content", "report this: pygit2 changed the commit")
    return oid


def verify_commit(
    repo: pygit2.Repository,
    oid: pygit2.Oid | str,
    allowed: Sequence[AllowedSigner],
) -> VerifiedSignature | None:
    """Check a commit's SSH signature as ``git verify-commit`` does; None when it is unsigned.

    Raises :class:`BadSignature` (malformed, not SSH, wrong namespace, not
    Ed25519, or not matching the commit) and :class:`UntrustedSigner` (valid,
    but no entry of ``allowed`` trusts the key at the commit's committer time).
    """
    short = str(oid)[:12]
    try:
        commit = repo.get(_oid(oid))
    except ValueError:
        commit = None
    if not isinstance(commit, pygit2.Commit):
        raise SigningError(f"{short} is not a commit in this repository")
    signature, signed = commit_signature(commit)
    if signature is None or signed is None:
        return None
    try:
        public_key = verify(signature, signed, DEFAULT_NAMESPACE)
    except BadSignature as e:
        raise BadSignature(f"commit {short}: {e.message}", e.hint) from None
    when = datetime.fromtimestamp(commit.committer.time, UTC)
    principal = find_signer(allowed, public_key, DEFAULT_NAMESPACE, when)
    fp = fingerprint(public_key)
    if principal is None:
        raise UntrustedSigner(
            f"commit {short}: good signature, but key {fp} is not in the allowed signers",
            "if you trust that key, add it with trust_add; otherwise treat the commit as forged",
            public_key,
        )
    return VerifiedSignature(principal, fp, ED25519, public_key)
