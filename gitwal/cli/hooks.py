"""`git wal hooks install|uninstall|check`: gitwal's git hooks."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import StepFailed, UnknownRun
from ..githooks import install as githooks
from ..records.model import Intent
from ..wal import Wal
from . import emit_json, handled
from .options import JSON


@click.group()
def hooks() -> None:
    """Git hooks that refuse rewriting logs and committing half-applied steps."""


def _show(changes: list[githooks.HookChange], as_json: bool) -> None:
    if as_json:
        emit_json([{"hook": c.hook, "action": c.action} for c in changes])
    else:
        for c in changes:
            click.echo(f"{c.hook}: {c.action}")


@hooks.command()
@JSON
@handled
def install(as_json: bool) -> None:
    """Install the hooks (existing hooks are kept and chained); idempotent."""
    _show(githooks.install(Path(".")), as_json)


@hooks.command()
@JSON
@handled
def uninstall(as_json: bool) -> None:
    """Remove gitwal's hooks and restore the ones they chained to."""
    _show(githooks.uninstall(Path(".")), as_json)


@hooks.command()
@handled
def check() -> None:
    """Exit 1 if an intent of the current run is open (for pre-commit frameworks)."""
    wal = Wal(".")
    try:
        run = wal.run()
    except UnknownRun:
        return
    head = run.store.head()
    last = run.store.head_records(head)[-1] if head else None
    if isinstance(last, Intent):
        raise StepFailed(
            f"intent LSN {last.lsn} of run {run.id} is open: a commit now would checkpoint "
            "a half-applied step",
            f"run `git wal recover --run {run.id}` first",
        )


@hooks.command("receive-signatures", hidden=True)
@click.option("--allowed-signers", metavar="PATH", type=click.Path(path_type=Path),
              help="ssh allowed-signers file.")
@click.option("--require-signed", is_flag=True, help="Refuse unsigned appends too.")
@handled
def receive_signatures(allowed_signers: Path | None, require_signed: bool) -> None:
    """For the pre-receive hook: stdin holds `REF COMMIT` lines of pushed appends."""
    pairs = []
    for line in sys.stdin.read().splitlines():
        ref, _, commit = line.strip().partition(" ")
        if commit:
            pairs.append((ref, commit))
    problems = githooks.push_signature_problems(Path("."), pairs, allowed_signers,
                                                require_signed)
    for ref, commit, why in problems:
        click.echo(f"gitwal: refusing {ref}: append {commit[:12]}: {why}", err=True)
    if problems:
        sys.exit(1)
