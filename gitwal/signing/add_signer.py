"""Adding a trusted key to an allowed-signers file (`git wal trust add`).

Invariant: the file is replaced, never written in place, and adders are
serialised by a lock on the file, so a crash leaves the old list or the new
one and two adders never both decide "not there yet". A file that does not
parse is refused, never appended to.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from pathlib import Path

from ..base.durable import atomic_write, create_new, makedirs_durable
from .allowed_signers import ALLOWED_HELP, parse_allowed
from .errors import BadAllowedSigners, SigningError
from .sshwire import parse_public_key

__all__ = ["trust_add"]

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
        blob = parse_public_key(fields[0], fields[1])
    except ValueError as e:
        raise SigningError(f"not a usable public key: {e}",
                           "pass the contents of the .pub file: `ssh-ed25519 AAAA... comment`"
                           ) from None
    if _PRINCIPAL.fullmatch(name) is None:
        raise SigningError(f"{name!r} cannot be a principal",
                           "use a name without spaces, commas, quotes, '#' or wildcards, "
                           "e.g. gitwal@build-host")
    comment = fields[2].strip() if len(fields) == 3 else ""
    line = f"{name} {fields[0]} {fields[1]}" + (f" {comment}" if comment else "") + "\n"
    # The file is replaced, never written in place (gitwal/base/durable.py): a crash
    # leaves the old list or the new one. A symlink at ``file`` is the user's
    # own choice of where the list lives: it is kept, and its target replaced.
    target = Path(os.path.realpath(file))
    while True:
        if not os.path.lexists(target):
            if not target.parent.is_dir():
                makedirs_durable(target.parent)
            try:
                create_new(target, line.encode(), 0o644, "a")
            except FileExistsError:
                continue  # another adder created it first: add to theirs
            return True
        added = _add_locked(target, blob, name, line)
        if added is not None:
            return added


def _add_locked(file: Path, blob: bytes, name: str, line: str) -> bool | None:
    """Add ``line`` to the existing ``file`` unless it names ``blob`` for ``name``
    already; None when another adder replaced the file meanwhile (try again).

    The flock on the file serialises adders (two must not both decide "not
    there yet"); the file keeps its mode."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        st = os.fstat(fd)
        try:
            now = os.stat(file)
        except FileNotFoundError:
            return None
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return None  # locked a file another adder has since replaced
        if not os.access(file, os.W_OK):  # read-only: the owner does not want it changed
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        current = os.pread(fd, st.st_size, 0) if st.st_size else b""
        try:
            entries = parse_allowed(current.decode("utf-8"), str(file))
        except UnicodeDecodeError:
            raise BadAllowedSigners(f"{file} is not UTF-8 text", ALLOWED_HELP) from None
        for entry in entries:
            if entry.public_key == blob and name in entry.principals and not entry.cert_authority:
                return False
        if current and not current.endswith(b"\n"):
            line = "\n" + line
        atomic_write(file, current + line.encode(), stat.S_IMODE(st.st_mode), "a")
        return True
    finally:
        os.close(fd)
