"""Signing keys: Ed25519 in OpenSSH format, mode 0600, outside every repository.

A key gitwal generates is byte-compatible with ``ssh-keygen -t ed25519``: ssh
reads ours, we read theirs. Only Ed25519 is supported; other key types are
refused with a message that says so (docs/security.md, "Keys").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pygit2
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..base.durable import atomic_write, create_new, makedirs_durable
from ..base.userconfig import config_dir
from .errors import BadKey, KeyExists, SigningError
from .sshwire import (
    ED25519,
    WireError,
    ed25519_blob,
    fingerprint,
    parse_public_key,
    private_key_type,
    public_key_line,
)

__all__ = ["SigningKey", "default_key_path", "generate_key", "load_key",
           "refuse_inside_repository"]


class SigningKey:
    """An Ed25519 private key. ``repr`` never shows the secret."""

    __slots__ = ("_key", "comment", "path")

    def __init__(self, key: Ed25519PrivateKey, comment: str = "", path: Path | None = None):
        self._key = key
        self.comment = comment
        self.path = path

    @classmethod
    def generate(cls, comment: str = "") -> SigningKey:
        """A fresh key held in memory only (tests, or callers that store it themselves)."""
        return cls(Ed25519PrivateKey.generate(), comment)

    @property
    def public_key(self) -> bytes:
        """The public key blob: ``string "ssh-ed25519" || string key`` (32 bytes)."""
        raw = self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return ed25519_blob(raw)

    @property
    def public_line(self) -> str:
        """``ssh-ed25519 AAAA... comment``, as in an ``.pub`` file."""
        return public_key_line(self.public_key, self.comment)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key)

    def raw_sign(self, message: bytes) -> bytes:
        """The bare Ed25519 signature of ``message`` (sshsig.sign adds the framing)."""
        return self._key.sign(message)

    def _private_openssh(self) -> bytes:
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )

    def __repr__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"<SigningKey {ED25519} {self.fingerprint}{where}>"


def default_key_path() -> Path:
    """``$XDG_CONFIG_HOME/gitwal/signing_key`` (``~/.config`` when unset or relative).

    It is outside every repository on purpose: a key in the working tree could
    be committed, and one in ``.git`` is readable by everything that reads the
    repository.
    """
    return config_dir() / "signing_key"


def generate_key(path: Path, comment: str = "gitwal", overwrite: bool = False) -> str:
    """Create an Ed25519 key at ``path`` (OpenSSH format, mode 0600) and return its public line.

    Missing parent directories are created with mode 0700. The public line is
    also written to ``<path>.pub`` (mode 0644), as ssh-keygen does. Unless
    ``overwrite``, an existing file at ``path`` is never overwritten:
    :class:`KeyExists` is raised and nothing changes. With ``overwrite`` the
    old key is replaced atomically (a crash leaves the old key or the new one).
    """
    path = Path(path)
    exists = KeyExists(
        f"a file exists already at {path}; gitwal never overwrites a key",
        "use it (load_key), or move it away first if you really mean to replace it: "
        "anything signed with it can then no longer be tied to a key you hold",
    )
    if "\n" in comment or "\r" in comment:
        raise SigningError("a key comment must be one line", "drop the line break")
    if os.path.lexists(path):
        if not overwrite:
            raise exists
        if path.is_dir() and not path.is_symlink():
            raise KeyExists(f"{path} is a directory, not a key file",
                            "name a file path for the key")
    # Durable writes (gitwal/base/durable.py): the key is whole and synced before
    # its name appears, and a crash leaves the old key or the new one.
    makedirs_durable(path.parent, mode=0o700)
    key = SigningKey.generate(comment)
    if overwrite:
        # rename(2) over the name: atomic, and never follows a symlink there
        atomic_write(path, key._private_openssh(), 0o600, "k")
    else:
        try:
            create_new(path, key._private_openssh(), 0o600, "k")  # link(2): never replaces
        except FileExistsError:
            raise exists from None
    atomic_write(path.with_name(path.name + ".pub"), (key.public_line + "\n").encode(),
                 0o644, "k")
    return key.public_line


def refuse_inside_repository(path: Path, repo: pygit2.Repository) -> None:
    """Raise :class:`BadKey` when ``path`` lies in ``repo``'s working tree or git dir.

    A key in the working tree can be committed and pushed; one under ``.git``
    is readable by everything that reads the repository.
    """
    where = Path(os.path.realpath(path))
    roots = [Path(os.path.realpath(repo.path))]
    if repo.workdir:
        roots.append(Path(os.path.realpath(repo.workdir)))
    for root in roots:
        if where == root or root in where.parents:
            raise BadKey(
                f"refusing to put a signing key inside the repository ({root}): {path}",
                "keep keys outside every repository: omit --path for the default "
                f"({default_key_path()}), or name a path elsewhere",
            )


_KINDS = {"ssh-rsa": "an RSA", "ssh-dss": "a DSA", "sk-ssh-ed25519@openssh.com":
          "a security-key (FIDO) Ed25519", "sk-ecdsa-sha2-nistp256@openssh.com":
          "a security-key (FIDO) ECDSA"}


def _key_kind(ssh_type: str) -> str:
    """How an error names a key of OpenSSH type ``ssh_type`` ("an RSA", "an ECDSA" ...)."""
    if ssh_type.startswith("ecdsa-sha2-"):
        return "an ECDSA"
    return _KINDS.get(ssh_type, f"a {ssh_type!r}")


def load_key(path: Path, passphrase: bytes | None = None) -> SigningKey:
    """Read an Ed25519 private key in OpenSSH format.

    Refused, like ssh refuses it: a missing file, a file that is not regular,
    one the group or others may read or write (any of the 0o077 bits), a key
    that is not OpenSSH format, an encrypted key without ``passphrase``, and
    any key type but Ed25519.
    """
    path = Path(path)
    create = f"create one with `ssh-keygen -t ed25519 -N '' -f {path}`"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise BadKey(f"no signing key at {path}", create) from None
    except PermissionError:
        raise BadKey(f"the signing key {path} is not readable by this user",
                     "run as the user that owns the key (docs/security.md)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadKey(f"the signing key {path} is not a regular file", create)
        if st.st_mode & 0o077:
            raise BadKey(
                f"permissions {stat.S_IMODE(st.st_mode):04o} for the signing key {path} "
                "are too open: group or others can read or write it",
                f"chmod 600 {path}  (and treat the key as exposed if others could read it)",
            )
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
    finally:
        os.close(fd)
    if b"-----BEGIN OPENSSH PRIVATE KEY-----" not in data:
        raise BadKey(f"{path} is not an OpenSSH private key",
                     f"gitwal reads keys that ssh-keygen writes; {create}")
    # The type is named from the file itself, before anything is decrypted or
    # loaded: no key class of another algorithm is touched (cryptography
    # deprecates some, DSA among them, and warns on their names).
    try:
        kind = private_key_type(data)
    except WireError as e:
        raise BadKey(f"cannot read the signing key {path}: {e}", create) from None
    if kind != ED25519:
        raise BadKey(f"{path} holds {_key_kind(kind)} key; gitwal signs with Ed25519 keys only",
                     create)
    try:
        key = serialization.load_ssh_private_key(data, passphrase)
    except TypeError as e:  # encrypted without a passphrase, or a passphrase for a plain key
        raise BadKey(f"cannot read the signing key {path}: {e}",
                     "give the passphrase, or use an unencrypted key (docs/security.md)") from None
    except UnsupportedAlgorithm as e:
        if "bcrypt" in str(e):  # cryptography decrypts OpenSSH keys only with bcrypt installed
            raise BadKey(f"the signing key {path} is passphrase-protected, and reading such "
                         "keys needs the `bcrypt` package, which is not installed",
                         "install bcrypt, or use an unencrypted key that only the signing "
                         "user can read (docs/security.md)") from None
        raise BadKey(f"cannot read the signing key {path}: {e}", create) from None
    except ValueError as e:
        raise BadKey(f"cannot read the signing key {path}: {e}", create) from None
    if not isinstance(key, Ed25519PrivateKey):  # the file said ssh-ed25519; its key did not
        raise BadKey(f"{path} holds a {type(key).__name__} key; gitwal signs with Ed25519 "
                     "keys only", create)
    comment = ""
    pub = path.with_name(path.name + ".pub")
    try:
        fields = pub.read_text().split(None, 2)
        blob = parse_public_key(fields[0], fields[1]) if len(fields) == 3 else b""
        if blob == SigningKey(key).public_key:
            comment = fields[2].strip()
    except (OSError, UnicodeDecodeError, ValueError):
        pass  # the comment is cosmetic
    return SigningKey(key, comment, path)

