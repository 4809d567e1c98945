"""The signer the log layer is handed: ``git config wal.signingKey``, loaded
only when an append is first signed (the key code and its cryptography
dependency stay out of every command that signs nothing).

The store (log/store.py) knows only the ``Signer`` protocol of
log/packwrite.py, which :class:`KeySigner` keeps; the facade (wal.py) gives it
:func:`configured_signer`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

if TYPE_CHECKING:
    from .keys import SigningKey


class KeySigner:
    """A :class:`Signer` over an Ed25519 key file, read on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._key: SigningKey | None = None

    def _load(self) -> SigningKey:
        if self._key is None:
            from .keys import load_key

            self._key = load_key(self.path)
        return self._key

    @property
    def fingerprint(self) -> str:
        return self._load().fingerprint

    def sign(self, content: bytes) -> str:
        from .commits import sign_commit_buffer

        return sign_commit_buffer(self._load(), content)


def configured_signer(repo: pygit2.Repository) -> KeySigner | None:
    """The signer ``git config wal.signingKey`` names; None: appends are unsigned."""
    try:
        path = str(repo.config["wal.signingKey"])
    except KeyError:
        return None
    return KeySigner(Path(os.path.expanduser(path)))
