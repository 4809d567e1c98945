"""SSH wire encoding (RFC 4251 section 5) and public key blobs.

Shared by the key files (signing/keys.py), the allowed-signers file
(signing/allowed_signers.py) and signatures (signing/sshsig.py). A public key blob is what
OpenSSH puts, base64-encoded, in an ``.pub`` line: ``string keytype ||
string key``; for Ed25519 the key is 32 raw bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct

ED25519 = "ssh-ed25519"
DEFAULT_NAMESPACE = "git"  # the sshsig namespace git uses for commits (ssh-keygen -Y ... -n git)


class WireError(ValueError):
    """A wire-format buffer ended early, had bytes left over, or held the wrong thing."""


def ssh_string(data: bytes) -> bytes:
    """``string``: a big-endian uint32 length, then the bytes."""
    return struct.pack(">I", len(data)) + data


class Reader:
    """Reads wire-format fields in order; every short read is a :class:`WireError`."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if self._pos + n > len(self._data):
            raise WireError("ends early")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def string(self) -> bytes:
        return self.take(self.uint32())

    def text(self) -> str:
        raw = self.string()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("a name is not UTF-8") from None

    def end(self) -> None:
        if self._pos != len(self._data):
            raise WireError(f"{len(self._data) - self._pos} bytes of trailing data")


def key_type(blob: bytes) -> str:
    """The key type a public key blob names (raises WireError when it cannot)."""
    return Reader(blob).text()


def ed25519_blob(raw: bytes) -> bytes:
    """The public key blob of 32 raw Ed25519 bytes."""
    return ssh_string(ED25519.encode()) + ssh_string(raw)


def ed25519_raw(blob: bytes) -> bytes:
    """The 32 raw bytes of an ``ssh-ed25519`` public key blob."""
    r = Reader(blob)
    if r.text() != ED25519:
        raise WireError("not an ssh-ed25519 key")
    raw = r.string()
    r.end()
    if len(raw) != 32:
        raise WireError(f"an Ed25519 key has 32 bytes, this one {len(raw)}")
    return raw


def fingerprint(public_key: bytes) -> str:
    """``SHA256:...`` of a public key blob, as ``ssh-keygen -l`` and git print it."""
    digest = hashlib.sha256(public_key).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def public_key_line(public_key: bytes, comment: str = "") -> str:
    """The ``keytype base64 [comment]`` line of an ``.pub`` file for a key blob."""
    line = f"{key_type(public_key)} {base64.b64encode(public_key).decode()}"
    return f"{line} {comment}" if comment else line


def parse_public_key(keytype: str, b64: str) -> bytes:
    """Decode ``keytype base64`` into a key blob; raises ValueError saying why not.

    Any key type is accepted (an allowed-signers file may name RSA keys that
    gitwal never matches); an Ed25519 blob must be well-formed.
    """
    try:
        blob = base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise ValueError(f"the key is not valid base64: {b64[:20]}...") from None
    try:
        inner = key_type(blob)
        if inner == ED25519:
            ed25519_raw(blob)
    except WireError as e:
        raise ValueError(f"the {keytype} key is malformed ({e})") from None
    if inner != keytype:
        raise ValueError(f"the line says {keytype} but the key is {inner}")
    return blob


_OPENSSH_BEGIN = b"-----BEGIN OPENSSH PRIVATE KEY-----"
_OPENSSH_END = b"-----END OPENSSH PRIVATE KEY-----"
_OPENSSH_MAGIC = b"openssh-key-v1\0"


def private_key_type(pem: bytes) -> str:
    """The key type an OpenSSH private key file names (``ssh-ed25519``, ``ssh-rsa`` ...).

    Read from the file's public section (PROTOCOL.key: magic, cipher, kdf,
    kdf options, key count, then each public key blob), which is in the clear
    even when the key is encrypted: a key of another type is named and refused
    without decrypting it or building a key object of a type a cryptography
    release may deprecate. Raises WireError when the file is not of that form.
    """
    start = pem.find(_OPENSSH_BEGIN)
    end = pem.find(_OPENSSH_END, start)
    if start < 0 or end < 0:
        raise WireError("not an OpenSSH private key")
    try:
        body = base64.b64decode(b"".join(pem[start + len(_OPENSSH_BEGIN) : end].split()),
                                validate=True)
    except binascii.Error:
        raise WireError("the key is not valid base64") from None
    if not body.startswith(_OPENSSH_MAGIC):
        raise WireError("not an openssh-key-v1 key")
    r = Reader(body[len(_OPENSSH_MAGIC) :])
    r.string()  # cipher name
    r.string()  # kdf name
    r.string()  # kdf options
    if r.uint32() < 1:
        raise WireError("the file holds no key")
    return key_type(r.string())
