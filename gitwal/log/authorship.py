"""The per-clone MAC: which records this clone wrote. What a record may
authorize follows from it (trust/authority.py asks :func:`written_here`).

An intent's ``check`` and an exec intent's ``argv`` are commands. A log is
data (docs/security.md): it may have been fetched, appended to by another
clone, or written by hand with git plumbing. So gitwal runs a command read
from a record (and writes the images a record names into the tree) only
when this clone wrote that record: :func:`attach` gives
every intent an ``auth`` field, an HMAC-SHA256 of its
canonical bytes without ``auth``, keyed by a secret of this clone;
:func:`require` is the gate in front of every command gitwal runs
(commands.run_check, commands.run_command).

The secret is 32 random bytes in ``<common git dir>/wal/secret`` (mode 0600),
created on first use. It is in no ref, so it is never pushed or fetched: a
record whose MAC verifies was written by a gitwal process of this clone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import pygit2

from ..base.durable import create_once, makedirs_durable
from ..base.errors import WalError
from ..base.repository import common_dir
from ..records.codec import encode
from ..records.model import EXEC_TOOL, MACED, Intent, Maced, Record

SECRET_BYTES = 32
R = TypeVar("R", bound=Record)


class ForeignCommand(WalError):
    """A record asks gitwal to run a command that the local user did not write."""


def secret_path(repo: pygit2.Repository) -> Path:
    return common_dir(repo) / "wal" / "secret"


# The secret never changes once made: read it once per process and clone.
_cache: dict[Path, bytes] = {}


def _secret(repo: pygit2.Repository, create: bool) -> bytes | None:
    path = secret_path(repo)
    if path in _cache:
        return _cache[path]
    if create and not path.exists():
        makedirs_durable(path.parent)
        create_once(path, secrets.token_bytes(SECRET_BYTES))  # a racing creator may win
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _bad_secret(path, f"cannot be read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        data = os.read(fd, SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        # Anyone else who can read it could vouch for their own commands.
        raise _bad_secret(path, "is not a private file of this user (mode 0600)")
    if len(data) != SECRET_BYTES:
        raise _bad_secret(path, f"does not hold {SECRET_BYTES} bytes")
    _cache[path] = data
    return data


def _bad_secret(path: Path, why: str) -> WalError:
    return WalError(
        f"the command-authorship secret {path} {why}",
        f"remove it (`rm {path}`): gitwal makes a new one, and commands of steps "
        "logged before then are no longer run by recovery",
    )


def carries_command(intent: Intent) -> bool:
    return intent.check is not None or intent.tool == EXEC_TOOL


def _mac(secret: bytes, record: Maced) -> str:
    return hmac.new(secret, encode(replace(record, auth=None)), hashlib.sha256).hexdigest()


def attach(repo: pygit2.Repository, record: R) -> R:
    """``record`` with this clone's proof of authorship when its type carries
    one (records.model.MACED: intents, commits, aborts, approvals, claims),
    else ``record`` as it is. Every such record gitwal appends gets one."""
    if not isinstance(record, MACED):
        return record
    secret = _secret(repo, create=True)
    assert secret is not None
    out: R = replace(record, auth=_mac(secret, record))
    return out


def clone_id(repo: pygit2.Repository) -> str:
    """This clone's public name (16 hex digits): derived from the secret by a
    keyed hash, so it names the clone without telling anything of the secret."""
    secret = _secret(repo, create=True)
    assert secret is not None
    return hmac.new(secret, b"gitwal clone id", hashlib.sha256).hexdigest()[:16]


def written_here(repo: pygit2.Repository, record: Record) -> bool:
    """True when this clone wrote ``record`` (its ``auth`` verifies)."""
    if not isinstance(record, MACED) or record.auth is None:
        return False
    secret = _secret(repo, create=False)
    return secret is not None and hmac.compare_digest(record.auth, _mac(secret, record))


def require(repo: pygit2.Repository, intent: Intent, what: str, command: str) -> None:
    """Raise :class:`ForeignCommand` unless this clone wrote ``intent`` and
    ``command`` (its ``what``: "check" or "command") is the one it carries."""
    if written_here(repo, intent):
        return
    raise ForeignCommand(
        f"run {intent.run} LSN {intent.lsn}: the {what} {command!r} was not written in "
        "this clone (the log was fetched, or written by another clone or by hand); "
        "it was not run",
        f"read the step with `git wal log --run {intent.run}`; if you trust the command, "
        f"run it yourself; `git wal drop {intent.run}` sets the run aside",
    )


def foreign_command(repo: pygit2.Repository, intent: Intent) -> str | None:
    """The command ``intent`` carries if this clone did not write it, else None."""
    if not carries_command(intent) or written_here(repo, intent):
        return None
    if intent.tool == EXEC_TOOL:
        argv = intent.args.get("argv")
        return " ".join(argv) if isinstance(argv, list) else repr(argv)
    return intent.check
