"""Signing with SSH keys: Ed25519 keys, git's allowed-signers file, and sshsig.

This is the only module that imports ``cryptography``. It speaks the formats
OpenSSH and git use, so that a signature gitwal makes is checked by plain
``git verify-commit`` / ``ssh-keygen -Y verify``, and one they make is checked
here (docs/security.md):

* keys: an Ed25519 private key in OpenSSH format, mode 0600, outside any
  repository (:func:`default_key_path`);
* trust: git's ``gpg.ssh.allowedSignersFile`` format, one
  ``principal[,principal...] [options] keytype base64key [comment]`` per line
  (ssh-keygen(1), "ALLOWED SIGNERS");
* signatures: OpenSSH's PROTOCOL.sshsig, the armored
  ``-----BEGIN SSH SIGNATURE-----`` block that ``ssh-keygen -Y sign`` writes
  and git stores in a commit's ``gpgsig`` header when ``gpg.format=ssh``.

gitwal signs with Ed25519 only and verifies Ed25519 signatures only; other key
types are refused with a message that says so.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import os
import re
import stat
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pygit2
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .durable import fsync_dir
from .errors import WalError

__all__ = [
    "DEFAULT_NAMESPACE",
    "AllowedSigner",
    "BadAllowedSigners",
    "BadKey",
    "BadSignature",
    "KeyExists",
    "SigningError",
    "SigningKey",
    "UntrustedSigner",
    "VerifiedSignature",
    "create_signed_commit",
    "default_key_path",
    "find_signer",
    "fingerprint",
    "generate_key",
    "load_allowed",
    "load_key",
    "public_key_line",
    "sign",
    "sign_commit_buffer",
    "trust_add",
    "verify",
    "verify_commit",
]

DEFAULT_NAMESPACE = "git"  # what git passes to ssh-keygen -Y sign/verify for commits
ED25519 = "ssh-ed25519"

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
_COMMIT_SIG_FIELD = "gpgsig"  # SHA-1 repositories; git uses gpgsig-sha256 in SHA-256 ones
_ALLOWED_HELP = "the format is git's gpg.ssh.allowedSignersFile (ssh-keygen(1), ALLOWED SIGNERS)"


# -- errors ------------------------------------------------------------------


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


# -- SSH wire format (RFC 4251 section 5) ----------------------------------------


class _Short(ValueError):
    """A wire-format buffer ended early or had bytes left over."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if self._pos + n > len(self._data):
            raise _Short("ends early")
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
            raise _Short("a name is not UTF-8") from None

    def end(self) -> None:
        if self._pos != len(self._data):
            raise _Short(f"{len(self._data) - self._pos} bytes of trailing data")


def _key_type(blob: bytes) -> str:
    """The key type a public key blob names (raises _Short when it cannot)."""
    return _Reader(blob).text()


def _ed25519_raw(blob: bytes) -> bytes:
    """The 32 raw bytes of an ``ssh-ed25519`` public key blob."""
    r = _Reader(blob)
    if r.text() != ED25519:
        raise _Short("not an ssh-ed25519 key")
    raw = r.string()
    r.end()
    if len(raw) != 32:
        raise _Short(f"an Ed25519 key has 32 bytes, this one {len(raw)}")
    return raw


def fingerprint(public_key: bytes) -> str:
    """``SHA256:...`` of a public key blob, as ``ssh-keygen -l`` and git print it."""
    digest = hashlib.sha256(public_key).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def public_key_line(public_key: bytes, comment: str = "") -> str:
    """The ``keytype base64 [comment]`` line of an ``.pub`` file for a key blob."""
    line = f"{_key_type(public_key)} {base64.b64encode(public_key).decode()}"
    return f"{line} {comment}" if comment else line


def _parse_key_tokens(keytype: str, b64: str) -> bytes:
    """Decode ``keytype base64`` into a key blob; raises ValueError saying why not."""
    try:
        blob = base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise ValueError(f"the key is not valid base64: {b64[:20]}...") from None
    try:
        inner = _key_type(blob)
        if inner == ED25519:
            _ed25519_raw(blob)
    except _Short as e:
        raise ValueError(f"the {keytype} key is malformed ({e})") from None
    if inner != keytype:
        raise ValueError(f"the line says {keytype} but the key is {inner}")
    return blob


# -- keys ----------------------------------------------------------------------


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
        return _string(ED25519.encode()) + _string(raw)

    @property
    def public_line(self) -> str:
        """``ssh-ed25519 AAAA... comment``, as in an ``.pub`` file."""
        return public_key_line(self.public_key, self.comment)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key)

    def _sign_raw(self, message: bytes) -> bytes:
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
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "gitwal" / "signing_key"


def _make_private_dirs(path: Path) -> None:
    """Create the missing ancestors of ``path`` with mode 0700 (existing ones are left alone)."""
    missing: list[Path] = []
    d = path
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)  # the umask may have taken bits away; never adds any
        fsync_dir(d.parent)


def _write_new(path: Path, data: bytes, mode: int, replace_stale: bool = True) -> Path:
    """Create ``path`` with exactly ``mode``, write ``data``, fsync.

    A file already there is removed first when ``replace_stale`` (our own
    leftover temporary file), else it is an error (FileExistsError).
    """
    if replace_stale:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have taken bits away
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def generate_key(path: Path, comment: str = "gitwal") -> str:
    """Create an Ed25519 key at ``path`` (OpenSSH format, mode 0600) and return its public line.

    Missing parent directories are created with mode 0700. The public line is
    also written to ``<path>.pub`` (mode 0644), as ssh-keygen does. An existing
    file at ``path`` is never overwritten: :class:`KeyExists` is raised and
    nothing changes.
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
        raise exists
    _make_private_dirs(path.parent)
    key = SigningKey.generate(comment)
    # Write a temporary file, then link it into place: link(2) never replaces an
    # existing name, and a crash leaves either no key or a whole one.
    tmp = _write_new(path.with_name(f".{path.name}.{os.getpid()}.tmp"),
                     key._private_openssh(), 0o600)
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise exists from None
    except OSError:  # a file system without hard links: create it in place, exclusively
        try:
            _write_new(path, key._private_openssh(), 0o600, replace_stale=False)
        except FileExistsError:
            raise exists from None
    finally:
        tmp.unlink()
    pub = path.with_name(path.name + ".pub")
    tmp = _write_new(path.with_name(f".{path.name}.pub.{os.getpid()}.tmp"),
                     (key.public_line + "\n").encode(), 0o644)
    os.replace(tmp, pub)
    fsync_dir(path.parent)
    return key.public_line


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
    if not isinstance(key, Ed25519PrivateKey):
        kinds = ((rsa.RSAPrivateKey, "an RSA"), (ec.EllipticCurvePrivateKey, "an ECDSA"),
                 (dsa.DSAPrivateKey, "a DSA"))
        kind = next((k for cls, k in kinds if isinstance(key, cls)), f"a {type(key).__name__}")
        raise BadKey(f"{path} holds {kind} key; gitwal signs with Ed25519 keys only", create)
    comment = ""
    pub = path.with_name(path.name + ".pub")
    try:
        fields = pub.read_text().split(None, 2)
        blob = _parse_key_tokens(fields[0], fields[1]) if len(fields) == 3 else b""
        if blob == SigningKey(key).public_key:
            comment = fields[2].strip()
    except (OSError, UnicodeDecodeError, ValueError):
        pass  # the comment is cosmetic
    return SigningKey(key, comment, path)


# -- allowed signers -------------------------------------------------------------


@dataclass(frozen=True)
class AllowedSigner:
    """One line of an allowed-signers file."""

    principals: tuple[str, ...]
    key_type: str
    public_key: bytes  # the key blob
    options: tuple[tuple[str, str | None], ...] = ()  # (name lowercased, dequoted value)
    comment: str = ""
    line: int = 0  # 1-based line number in the file it came from

    def _option(self, name: str) -> str | None:
        for k, v in self.options:
            if k == name:
                return v
        return None

    @property
    def cert_authority(self) -> bool:
        return any(k == "cert-authority" for k, _ in self.options)

    @property
    def namespaces(self) -> tuple[str, ...] | None:
        """The ``namespaces="..."`` patterns, or None when the entry allows every namespace."""
        v = self._option("namespaces")
        return None if v is None else tuple(v.split(","))

    @property
    def valid_after(self) -> datetime | None:
        v = self._option("valid-after")
        return None if v is None else _parse_time(v)

    @property
    def valid_before(self) -> datetime | None:
        v = self._option("valid-before")
        return None if v is None else _parse_time(v)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key)


def _parse_time(text: str) -> datetime:
    """ssh's ``YYYYMMDD[HHMM[SS]][Z]``: UTC with ``Z``, local time without."""
    m = re.fullmatch(r"(\d{8})(\d{4}(\d{2})?)?(Z?)", text)
    if m is None:
        raise ValueError(f"{text!r} is not a time (YYYYMMDD[HHMM[SS]][Z])")
    digits = m.group(1) + (m.group(2) or "0000")
    if m.group(3) is None:
        digits += "00"
    try:
        naive = datetime.strptime(digits, "%Y%m%d%H%M%S")
    except ValueError:
        raise ValueError(f"{text!r} is not a valid time") from None
    return naive.replace(tzinfo=UTC) if m.group(4) else naive.astimezone()


def _token(line: str, pos: int) -> tuple[str, int]:
    """The next whitespace-separated token from ``pos``; double quotes may hide spaces."""
    while pos < len(line) and line[pos] in " \t":
        pos += 1
    start, quoted = pos, False
    while pos < len(line) and (quoted or line[pos] not in " \t"):
        if line[pos] == '"':
            quoted = not quoted
        pos += 1
    if quoted:
        raise ValueError("a double quote is not closed")
    return line[start:pos], pos


def _split_options(text: str) -> list[str]:
    out, cur, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


_VALUED_OPTIONS = ("namespaces", "valid-after", "valid-before")


def _parse_options(text: str) -> tuple[tuple[str, str | None], ...]:
    out: list[tuple[str, str | None]] = []
    for opt in _split_options(text):
        name, eq, value = opt.partition("=")
        name = name.lower()
        if name == "cert-authority" and not eq:
            out.append((name, None))
            continue
        if name not in _VALUED_OPTIONS or not eq:
            raise ValueError(f"unknown option {opt!r}")
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if '"' in value or not value:
            raise ValueError(f"option {name} has a malformed value")
        if name != "namespaces":
            _parse_time(value)
        out.append((name, value))
    return tuple(out)


def _parse_allowed_line(text: str, lineno: int) -> AllowedSigner:
    first, pos = _token(text, 0)
    if first.startswith('"'):
        if not first.endswith('"') or len(first) < 2:
            raise ValueError("the quoted principals are malformed")
        first = first[1:-1]
    principals = tuple(first.split(","))
    if not all(principals):
        raise ValueError("an empty principal")
    tok, pos = _token(text, pos)
    options: tuple[tuple[str, str | None], ...] = ()
    key_b64, after_key = _token(text, pos)
    if not tok or not key_b64:
        raise ValueError("no key after the principals")
    if "=" not in tok and tok.lower() != "cert-authority":
        keytype, blob = tok, _parse_key_tokens(tok, key_b64)
    else:  # options come between the principals and the key
        options = _parse_options(tok)
        keytype, pos = _token(text, pos)
        key_b64, after_key = _token(text, pos)
        if not keytype or not key_b64:
            raise ValueError("no key after the options") from None
        blob = _parse_key_tokens(keytype, key_b64)
    return AllowedSigner(principals, keytype, blob, options, text[after_key:].strip(), lineno)


def _parse_allowed(text: str, source: str) -> list[AllowedSigner]:
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.append(_parse_allowed_line(line, lineno))
        except ValueError as e:
            raise BadAllowedSigners(f"{source}:{lineno}: {e}",
                                    f"fix or remove that line; {_ALLOWED_HELP}") from None
    return out


def load_allowed(file: Path) -> list[AllowedSigner]:
    """Every entry of an allowed-signers file, in file order.

    A line that does not parse is an error naming the file and line (as in
    ssh-keygen, one bad line makes the whole file unusable: fail closed).
    """
    file = Path(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadAllowedSigners(f"no allowed signers file at {file}",
                                "add a trusted key with trust_add") from None
    except UnicodeDecodeError:
        raise BadAllowedSigners(f"{file} is not UTF-8 text", _ALLOWED_HELP) from None
    return _parse_allowed(text, str(file))


def _pattern_match(value: str, pattern: str) -> bool:
    """ssh's match_pattern: ``*`` and ``?`` wildcards, nothing else special."""
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, re.DOTALL) is not None


def _pattern_list_match(value: str, patterns: Sequence[str]) -> bool:
    """ssh's match_pattern_list: a ``!pattern`` match vetoes, else any pattern matches."""
    hit = False
    for p in patterns:
        if p.startswith("!"):
            if _pattern_match(value, p[1:]):
                return False
        elif _pattern_match(value, p):
            hit = True
    return hit


def find_signer(
    allowed: Sequence[AllowedSigner],
    public_key: bytes,
    namespace: str = DEFAULT_NAMESPACE,
    at: datetime | None = None,
) -> str | None:
    """The principals (comma-joined, as written) of the first entry that trusts this key.

    An entry trusts the key when it names the same key blob, is not a
    ``cert-authority`` line (certificates are not supported), allows
    ``namespace`` (its ``namespaces=`` patterns, if any) and is valid at
    ``at`` (default: now) per ``valid-after``/``valid-before``.
    """
    when = at if at is not None else datetime.now(UTC)
    if when.tzinfo is None:
        when = when.astimezone()
    for entry in allowed:
        if entry.cert_authority or entry.public_key != public_key:
            continue
        ns = entry.namespaces
        if ns is not None and not _pattern_list_match(namespace, ns):
            continue
        after, before = entry.valid_after, entry.valid_before
        if (after is not None and when < after) or (before is not None and when > before):
            continue
        return ",".join(entry.principals)
    return None


_PRINCIPAL = re.compile(r"[^\s,\"#*?!]+")


def trust_add(file: Path, pubkey: str, name: str) -> bool:
    """Append ``name pubkey`` to an allowed-signers file; False when it is there already.

    ``pubkey`` is a public key line (``ssh-ed25519 AAAA... [comment]``). The
    file is created with mode 0644 when missing (its directory too). An entry
    that already names this key for ``name`` is not duplicated. A malformed
    existing file is refused rather than appended to.
    """
    file = Path(file)
    fields = pubkey.strip().split(None, 2)
    if len(fields) < 2:
        raise SigningError(f"not a public key line: {pubkey.strip()[:40]!r}",
                           "pass the contents of the .pub file: `ssh-ed25519 AAAA... comment`")
    try:
        blob = _parse_key_tokens(fields[0], fields[1])
    except ValueError as e:
        raise SigningError(f"not a usable public key: {e}",
                           "pass the contents of the .pub file: `ssh-ed25519 AAAA... comment`"
                           ) from None
    if _PRINCIPAL.fullmatch(name) is None:
        raise SigningError(f"{name!r} cannot be a principal",
                           "use a name without spaces, commas, quotes, '#' or wildcards, "
                           "e.g. gitwal@build-host")
    comment = fields[2].strip() if len(fields) == 3 else ""
    if not file.parent.is_dir():
        file.parent.mkdir(parents=True, exist_ok=True)
    existed = os.path.lexists(file)
    fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if not existed:
            os.fchmod(fd, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # two adders must not both decide "not there yet"
        size = os.fstat(fd).st_size
        current = os.pread(fd, size, 0) if size else b""
        try:
            entries = _parse_allowed(current.decode("utf-8"), str(file))
        except UnicodeDecodeError:
            raise BadAllowedSigners(f"{file} is not UTF-8 text", _ALLOWED_HELP) from None
        for entry in entries:
            if entry.public_key == blob and name in entry.principals and not entry.cert_authority:
                return False
        line = f"{name} {fields[0]} {fields[1]}" + (f" {comment}" if comment else "") + "\n"
        if current and not current.endswith(b"\n"):
            line = "\n" + line
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    if not existed:
        fsync_dir(file.parent)
    return True


# -- sshsig ----------------------------------------------------------------------


def _check_namespace(namespace: str) -> bytes:
    if not namespace:
        raise SigningError("the signature namespace is empty",
                           f"use {DEFAULT_NAMESPACE!r} for git commits")
    return namespace.encode("utf-8")


def _signed_data(namespace: bytes, hash_alg: str, data: bytes) -> bytes:
    """What the key actually signs (PROTOCOL.sshsig, "Signed Data")."""
    return (
        _MAGIC
        + _string(namespace)
        + _string(b"")  # reserved
        + _string(hash_alg.encode())
        + _string(_HASHES[hash_alg](data))
    )


def sign(key: SigningKey, data: bytes, namespace: str = DEFAULT_NAMESPACE) -> str:
    """An armored SSH signature of ``data`` (what ``ssh-keygen -Y sign -n namespace`` writes)."""
    ns = _check_namespace(namespace)
    raw = key._sign_raw(_signed_data(ns, _SIGN_HASH, data))
    blob = (
        _MAGIC
        + struct.pack(">I", _SIG_VERSION)
        + _string(key.public_key)
        + _string(ns)
        + _string(b"")  # reserved
        + _string(_SIGN_HASH.encode())
        + _string(_string(ED25519.encode()) + _string(raw))
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
        r = _Reader(blob)
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
        key_type = _key_type(public_key)
    except _Short as e:
        raise BadSignature(f"the SSH signature is truncated or malformed ({e})", hint) from None
    if key_type != ED25519:
        raise BadSignature(f"unsupported key type {key_type}: gitwal verifies "
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
        raw_key = _ed25519_raw(public_key)
        sr = _Reader(sig_blob)
        sig_type = sr.text()
        raw_sig = sr.string()
        sr.end()
    except _Short as e:
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


# -- signed git commits ------------------------------------------------------------


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


def _commit_signature(commit: pygit2.Commit) -> tuple[bytes | None, bytes | None]:
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
    if _commit_signature(commit)[1] != raw:  # what git will check is what we signed
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
    signature, signed = _commit_signature(commit)
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
