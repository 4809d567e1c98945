"""Where keys and trust live, and the library calls behind `git wal keygen` and `trust`.

* the signing key: ``--path``, else ``$XDG_CONFIG_HOME/gitwal/signing_key``;
  never inside the repository; ``git config wal.signingKey`` names it;
* the allowed-signers file: ``git config gpg.ssh.allowedSignersFile`` when
  set (the file git verify-commit reads too), else
  ``$XDG_CONFIG_HOME/gitwal/allowed_signers``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..base.errors import NotARepository
from ..base.repository import open_repository
from ..base.userconfig import config_dir
from .add_signer import trust_add
from .errors import KeyExists, SigningError
from .keys import default_key_path, generate_key, refuse_inside_repository
from .sshwire import fingerprint, parse_public_key

ALLOWED_SIGNERS_KEY = "gpg.ssh.allowedSignersFile"
SIGNING_KEY_KEY = "wal.signingKey"
_PUB_HINT = "pass the .pub file or its line: `ssh-ed25519 AAAA... comment`"


@dataclass(frozen=True)
class NewKey:
    path: Path
    public_line: str
    fingerprint: str
    configured: bool  # git config wal.signingKey now names it


@dataclass(frozen=True)
class TrustFile:
    path: Path
    source: str  # "--file", "git config gpg.ssh.allowedSignersFile" or "default"


def find_repository(path: str = ".") -> pygit2.Repository | None:
    """The repository around ``path`` with its real working tree (``.git``
    files, ``core.worktree``, GIT_DIR), or None outside any."""
    try:
        return open_repository(path)
    except NotARepository:
        return None


def keygen(path: Path | None, force: bool, configure: bool,
           repo: pygit2.Repository | None) -> NewKey:
    """Create an Ed25519 key outside ``repo``; with ``configure``, make ``repo`` sign with it."""
    target = Path(os.path.abspath(os.path.expanduser(path))) if path else default_key_path()
    if configure and repo is None:
        raise NotARepository("--configure sets `git config wal.signingKey` in a repository, "
                             "and this is not inside one",
                             "run it inside the repository, or drop --configure")
    if repo is not None:
        refuse_inside_repository(target, repo)
    try:
        line = generate_key(target, overwrite=force)
    except KeyExists as e:
        raise KeyExists(e.message, "use it (`git config wal.signingKey PATH`), or pass --force to "
                        "replace it (keep the old public key in the allowed signers, or what "
                        "it signed no longer verifies)") from None
    if configure:
        assert repo is not None
        repo.config[SIGNING_KEY_KEY] = str(target)
    blob = parse_public_key(*line.split()[:2])
    return NewKey(target, line, fingerprint(blob), configure)


def _configured(repo: pygit2.Repository | None) -> Path | None:
    """``gpg.ssh.allowedSignersFile`` from the repository's config (or the user's)."""
    configs: list[pygit2.Config] = []
    if repo is not None:
        configs.append(repo.config)
    else:
        for get in (pygit2.Config.get_global_config, pygit2.Config.get_xdg_config):
            try:
                configs.append(get())
            except (OSError, pygit2.GitError):  # no such file
                continue
    for config in configs:
        try:
            value = str(config[ALLOWED_SIGNERS_KEY])
        except KeyError:
            continue
        return Path(os.path.expanduser(value))
    return None


def allowed_signers_file(repo: pygit2.Repository | None, explicit: Path | None = None
                         ) -> TrustFile:
    """``explicit``, else git's ``gpg.ssh.allowedSignersFile``, else the default in the
    user's config dir (which may not exist yet)."""
    if explicit is not None:
        return TrustFile(Path(os.path.expanduser(explicit)), "--file")
    configured = _configured(repo)
    if configured is not None:
        return TrustFile(configured, f"git config {ALLOWED_SIGNERS_KEY}")
    return TrustFile(config_dir() / "allowed_signers", "default")


def public_line(arg: str, stdin: Iterator[str] | None = None) -> str:
    """A public key line from ``arg``: the line itself, a ``.pub`` file, or ``-`` (stdin)."""
    if arg == "-":
        lines = list(stdin or [])
        where = "standard input"
    elif len(arg.split()) >= 2:
        return arg.strip()
    else:
        file = Path(os.path.expanduser(arg))
        where = str(file)
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise SigningError(f"{arg!r} is neither a public key line nor a file",
                               _PUB_HINT) from None
        except (UnicodeDecodeError, IsADirectoryError):
            raise SigningError(f"{where} is not a public key file", _PUB_HINT) from None
    if any("PRIVATE KEY" in ln for ln in lines):
        raise SigningError(f"{where} holds a private key", f"never share it; {_PUB_HINT}")
    keys = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if len(keys) != 1:
        raise SigningError(f"{where} holds {len(keys)} key lines, not one", _PUB_HINT)
    return keys[0]


@dataclass(frozen=True)
class Trusted:
    file: Path
    name: str
    fingerprint: str
    added: bool  # False: the file already trusted this key as this name


def add(file: TrustFile, pubkey: str, name: str) -> Trusted:
    """Trust the key of the line ``pubkey`` as ``name`` in ``file`` (idempotent)."""
    added = trust_add(file.path, pubkey, name)  # validates the line, refusing a bad one
    blob = parse_public_key(*pubkey.split()[:2])
    return Trusted(file.path, name, fingerprint(blob), added)
