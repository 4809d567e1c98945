"""SSH signatures (OpenSSH PROTOCOL.sshsig): sign, verify, armor.

The armored ``-----BEGIN SSH SIGNATURE-----`` block is what ``ssh-keygen -Y
sign`` writes and what git stores in a commit's ``gpgsig`` header when
``gpg.format=ssh``. Ed25519 is deterministic, so a signature made here is
byte-for-byte the one ssh-keygen makes with the same key. Whether a key is
*trusted* is a separate question (signing/allowed_signers.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import BadSignature, SigningError
from .sshwire import (
    DEFAULT_NAMESPACE,
    ED25519,
    Reader,
    WireError,
    ed25519_raw,
    fingerprint,
    key_type,
    ssh_string,
)

if TYPE_CHECKING:
    from .keys import SigningKey

__all__ = ["sign", "verify"]

_MAGIC = b"SSHSIG"
_SIG_VERSION = 1
_SIGN_HASH = "sha512"  # what ssh-keygen uses by default
_HASHES: dict[str, Callable[[bytes], bytes]] = {
    "sha512": lambda d: hashlib.sha512(d).digest(),
    "sha256": lambda d: hashlib.sha256(d).digest(),
}
_ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END = "-----END SSH SIGNATURE-----"
_ARMOR_WIDTH = 70  # ssh-keygen wraps the base64 body at 70 columns


def _check_namespace(namespace: str) -> bytes:
    if not namespace:
        raise SigningError("the signature namespace is empty",
                           f"use {DEFAULT_NAMESPACE!r} for git commits")
    return namespace.encode("utf-8")


def _signed_data(namespace: bytes, hash_alg: str, data: bytes) -> bytes:
    """What the key actually signs (PROTOCOL.sshsig, "Signed Data")."""
    return (
        _MAGIC
        + ssh_string(namespace)
        + ssh_string(b"")  # reserved
        + ssh_string(hash_alg.encode())
        + ssh_string(_HASHES[hash_alg](data))
    )


def sign(key: SigningKey, data: bytes, namespace: str = DEFAULT_NAMESPACE) -> str:
    """An armored SSH signature of ``data`` (what ``ssh-keygen -Y sign -n namespace`` writes)."""
    ns = _check_namespace(namespace)
    raw = key.raw_sign(_signed_data(ns, _SIGN_HASH, data))
    blob = (
        _MAGIC
        + struct.pack(">I", _SIG_VERSION)
        + ssh_string(key.public_key)
        + ssh_string(ns)
        + ssh_string(b"")  # reserved
        + ssh_string(_SIGN_HASH.encode())
        + ssh_string(ssh_string(ED25519.encode()) + ssh_string(raw))
    )
    body = base64.b64encode(blob).decode()
    lines = [body[i : i + _ARMOR_WIDTH] for i in range(0, len(body), _ARMOR_WIDTH)]
    return "\n".join([_ARMOR_BEGIN, *lines, _ARMOR_END]) + "\n"


def _dearmor(armored: str) -> bytes:
    lines = [ln.strip() for ln in armored.strip().splitlines()]
    if not lines or lines[0] != _ARMOR_BEGIN:
        raise BadSignature(f"not an SSH signature: it does not start with {_ARMOR_BEGIN}",
                           "a PGP or X.509 signature, or none at all, is not an SSH signature")
    if len(lines) < 2 or lines[-1] != _ARMOR_END:
        raise BadSignature(f"the SSH signature is truncated: no {_ARMOR_END} line",
                           "the signature was cut short; it cannot be checked")
    body = "".join(lines[1:-1])
    if not body:
        raise BadSignature("the SSH signature is empty", "it cannot be checked")
    try:
        return base64.b64decode(body, validate=True)
    except binascii.Error:
        raise BadSignature("the SSH signature is damaged: its body is not valid base64 "
                           "(truncated or edited)", "it cannot be checked") from None


def verify(armored: str | bytes, data: bytes, namespace: str = DEFAULT_NAMESPACE) -> bytes:
    """Check an armored SSH signature over ``data``; return the signer's public key blob.

    This checks the signature only. Whether the key is trusted is a separate
    question: :func:`find_signer` against an allowed-signers file.
    """
    text = armored.decode("utf-8", "replace") if isinstance(armored, bytes) else armored
    blob = _dearmor(text)
    hint = "the signature cannot be checked; re-sign the data with a supported key"
    try:
        r = Reader(blob)
        if r.take(len(_MAGIC)) != _MAGIC:
            raise BadSignature("not an SSH signature: the blob does not start with SSHSIG",
                               hint)
        version = r.uint32()
        if version != _SIG_VERSION:
            raise BadSignature(f"unsupported SSH signature version {version} "
                               f"(this reader knows version {_SIG_VERSION})", hint)
        public_key = r.string()
        sig_ns = r.string()
        r.string()  # reserved: ignored by verifiers, and signed as empty (as ssh-keygen does)
        hash_alg = r.text()
        sig_blob = r.string()
        r.end()
        kind = key_type(public_key)
    except WireError as e:
        raise BadSignature(f"the SSH signature is truncated or malformed ({e})", hint) from None
    if kind != ED25519:
        raise BadSignature(f"unsupported key type {kind}: gitwal verifies "
                           f"{ED25519} signatures only", hint)
    expected_ns = _check_namespace(namespace)
    if sig_ns != expected_ns:
        shown = sig_ns.decode("utf-8", "replace")
        raise BadSignature(f"wrong signature namespace: signed for {shown!r}, "
                           f"expected {namespace!r}",
                           "a signature made for one purpose is not valid for another")
    if hash_alg not in _HASHES:
        raise BadSignature(f"unsupported hash algorithm {hash_alg!r} "
                           f"(sshsig allows {' and '.join(sorted(_HASHES))})", hint)
    try:
        raw_key = ed25519_raw(public_key)
        sr = Reader(sig_blob)
        sig_type = sr.text()
        raw_sig = sr.string()
        sr.end()
    except WireError as e:
        raise BadSignature(f"the SSH signature is malformed ({e})", hint) from None
    if sig_type != ED25519:
        raise BadSignature(f"the signature is a {sig_type} signature from an "
                           f"{ED25519} key", hint)
    try:
        Ed25519PublicKey.from_public_bytes(raw_key).verify(
            raw_sig, _signed_data(sig_ns, hash_alg, data)
        )
    except (InvalidSignature, ValueError):
        raise BadSignature(
            f"bad signature from key {fingerprint(public_key)}: the signed data or the "
            "signature was changed after signing",
            "do not trust this data; find out who changed it",
        ) from None
    return public_key
