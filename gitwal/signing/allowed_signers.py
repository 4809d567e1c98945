"""Trust: git's allowed-signers file (``gpg.ssh.allowedSignersFile``).

One ``principal[,principal...] [options] keytype base64key [comment]`` per
line (ssh-keygen(1), "ALLOWED SIGNERS"), so one file serves gitwal,
``git verify-commit`` and ``ssh-keygen -Y verify``. Parsing fails closed: a
line that does not parse makes the whole file unusable, as in ssh-keygen.
Which entry trusts a key is :func:`find_signer`; adding one is
signing/add_signer.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .errors import BadAllowedSigners
from .sshwire import DEFAULT_NAMESPACE, fingerprint, parse_public_key

__all__ = ["ALLOWED_HELP", "DEFAULT_NAMESPACE", "AllowedSigner", "find_signer", "load_allowed",
           "parse_allowed"]

ALLOWED_HELP = "the format is git's gpg.ssh.allowedSignersFile (ssh-keygen(1), ALLOWED SIGNERS)"


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
        keytype, blob = tok, parse_public_key(tok, key_b64)
    else:  # options come between the principals and the key
        options = _parse_options(tok)
        keytype, pos = _token(text, pos)
        key_b64, after_key = _token(text, pos)
        if not keytype or not key_b64:
            raise ValueError("no key after the options") from None
        blob = parse_public_key(keytype, key_b64)
    return AllowedSigner(principals, keytype, blob, options, text[after_key:].strip(), lineno)


def parse_allowed(text: str, source: str) -> list[AllowedSigner]:
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.append(_parse_allowed_line(line, lineno))
        except ValueError as e:
            raise BadAllowedSigners(f"{source}:{lineno}: {e}",
                                    f"fix or remove that line; {ALLOWED_HELP}") from None
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
        raise BadAllowedSigners(
            f"no allowed signers file at {file}",
            "add a trusted key with `git wal trust add PUBKEY --name NAME`") from None
    except UnicodeDecodeError:
        raise BadAllowedSigners(f"{file} is not UTF-8 text", ALLOWED_HELP) from None
    return parse_allowed(text, str(file))


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
