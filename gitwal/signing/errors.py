"""The failures of keys, trust and signatures: all :class:`WalError` with a hint (exit 1)."""

from __future__ import annotations

from ..base.errors import WalError
from .sshwire import fingerprint


class SigningError(WalError):
    """Anything about keys, trust or signatures."""


class KeyExists(SigningError):
    """generate_key found a key (or something else) at the path: nothing was written."""


class BadKey(SigningError):
    """A private key is missing, too open, unreadable, or not Ed25519."""


class BadAllowedSigners(SigningError):
    """The allowed-signers file is missing or has a line that does not parse."""


class BadSignature(SigningError):
    """A signature is malformed, for another namespace, of an unsupported key, or wrong."""


class UntrustedSigner(SigningError):
    """The signature is valid, but no allowed-signers entry names its key."""

    def __init__(self, message: str, hint: str, public_key: bytes) -> None:
        super().__init__(message, hint)
        self.public_key = public_key
        self.fingerprint = fingerprint(public_key)
