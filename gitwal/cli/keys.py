"""`git wal keygen` and `git wal trust add|list`: signing keys and who is trusted."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..signing import trust
from ..signing.allowed_signers import AllowedSigner, load_allowed
from .failures import handled
from .options import JSON
from .stdout import emit_json


@click.command()
@click.option("--path", "path", type=click.Path(path_type=Path), metavar="P",
              help="Where to write the key (default: $XDG_CONFIG_HOME/gitwal/signing_key); "
                   "never inside the repository.")
@click.option("--force", is_flag=True, help="Replace a key that exists at the path.")
@click.option("--configure", is_flag=True,
              help="Also `git config wal.signingKey PATH` in this repository.")
@JSON
@handled
def keygen(path: Path | None, force: bool, configure: bool, as_json: bool) -> None:
    """Create an Ed25519 signing key (OpenSSH format, mode 0600); prints its public line."""
    key = trust.keygen(path, force, configure, trust.find_repository())
    if as_json:
        emit_json({"path": str(key.path), "public_key": key.public_line,
                   "fingerprint": key.fingerprint, "configured": key.configured})
        return
    click.echo(key.public_line)
    click.echo(f"wrote {key.path} (and {key.path}.pub)"
               + ("; git config wal.signingKey now names it" if key.configured else ""),
               err=True)


@click.group("trust")
def trust_() -> None:
    """The allowed-signers file: which keys' signatures verify trusts."""


FILE = click.option("--file", "file", type=click.Path(path_type=Path), metavar="F",
                    help="The allowed-signers file (default: git config "
                         "gpg.ssh.allowedSignersFile, else "
                         "$XDG_CONFIG_HOME/gitwal/allowed_signers).")


@trust_.command("add")
@click.argument("pubkey", metavar="PUBKEY")
@click.option("--name", required=True, metavar="NAME",
              help="The principal to trust the key as, e.g. walsigner@ci.")
@FILE
@JSON
@handled
def add(pubkey: str, name: str, file: Path | None, as_json: bool) -> None:
    """Trust PUBKEY (a public key line, a .pub file, or - for stdin) as NAME; idempotent."""
    where = trust.allowed_signers_file(trust.find_repository(), file)
    got = trust.add(where, trust.public_line(pubkey, sys.stdin), name)
    if as_json:
        emit_json({"file": str(got.file), "name": got.name, "fingerprint": got.fingerprint,
                   "added": got.added})
        return
    verb = "trusted" if got.added else "already trusted"
    click.echo(f"{verb}: {got.name} {got.fingerprint} in {got.file}")


def _entry(e: AllowedSigner) -> dict[str, object]:
    return {"principals": list(e.principals), "key_type": e.key_type,
            "fingerprint": e.fingerprint, "options": {k: v for k, v in e.options},
            "comment": e.comment, "line": e.line}


@trust_.command("list")
@FILE
@JSON
@handled
def list_(file: Path | None, as_json: bool) -> None:
    """The trusted keys, one per line: principals, fingerprint, options."""
    where = trust.allowed_signers_file(trust.find_repository(), file)
    found = load_allowed(where.path)
    if as_json:
        emit_json({"file": str(where.path), "source": where.source,
                   "signers": [_entry(e) for e in found]})
        return
    for e in found:
        opts = ",".join(k if v is None else f'{k}="{v}"' for k, v in e.options)
        click.echo(" ".join(x for x in (",".join(e.principals), e.fingerprint, opts) if x))
    if not found:
        click.echo(f"no trusted keys in {where.path}", err=True)
