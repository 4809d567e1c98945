"""`git wal push`, `git wal fetch`, `git wal remote setup` (docs/remotes.md).

Exit 0 when every ref is where it should be, 1 when a push was refused or a
fetched log could not be integrated (each such ref gets `error:`/`hint:`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..base.errors import EXIT_ERROR
from ..remote import setup as rm
from .failures import handled
from .options import JSON, RUN
from .stdout import emit_json

REMOTE = click.argument("remote_name", metavar="[REMOTE]", required=False)


def _hint(remote: str, o: rm.RefOutcome) -> str:
    if o.status == "diverged":
        staged = rm.staging_prefix(remote) + o.ref[len("refs/"):]
        return (f"nothing was overwritten; the remote's copy is {staged} "
                f"(`git log {staged}`); decide which log is right before changing either")
    if o.status == "invalid":
        staged = rm.staging_prefix(remote) + o.ref[len("refs/"):]
        return (f"nothing was integrated: the fetched log fails the chain checks; the "
                f"remote's copy stays in {staged} (`git log {staged}`); repair the log "
                "where it was written, or ask who pushed it")
    if o.status == "busy":
        return "a live gitwal process holds the run; fetch again when it is done"
    if "non-fast-forward" in o.detail or "fetch first" in o.detail:
        return (f"the log on {remote} has appends this one lacks (the same run written in "
                f"two places?): `git wal fetch {remote}` shows how they diverged; "
                "nothing was forced")
    if "stale info" in o.detail:
        return "the remote's log moved while pushing; run `git wal push` again"
    if "remote rejected" in o.detail:
        return "the remote refused it; its reasons are above (remote: ...)"
    return "nothing was forced; see the messages above"


def _show(t: rm.Transfer, as_json: bool, verb: str) -> None:
    for line in t.messages:
        click.echo(line, err=True)
    if as_json:
        emit_json(t.to_dict())
    elif not t.refs:
        click.echo(f"no logs to {verb}")
    else:
        for o in t.refs:
            click.echo(f"{o.status:<10} {o.ref}" + (f": {o.detail}" if o.detail else ""))
    bad = [o for o in t.refs if o.status in rm.NEEDS_ATTENTION]
    for o in bad:
        click.echo(f"error: {o.ref}: {o.status}"
                   + (f" ({o.detail})" if o.detail else ""), err=True)
        click.echo(f"hint: {_hint(t.remote, o)}", err=True)
    if bad:
        sys.exit(EXIT_ERROR)


@click.command("push")
@REMOTE
@RUN
@click.option("--all", "everything", is_flag=True, help="Every run's log.")
@JSON
@handled
def push_(remote_name: str | None, run_id: str | None, everything: bool, as_json: bool) -> None:
    """Push run logs (default: the current run, else all) without ever forcing."""
    if run_id and everything:
        raise click.UsageError("--run and --all exclude each other",
                               click.get_current_context())
    _show(rm.push(Path("."), remote_name, run_id, everything), as_json, "push")


@click.command("fetch")
@REMOTE
@click.option("--run", "run_id", metavar="RUN",
              help="Only this run's log (live ref, archives, checkpoints).")
@click.option("--offline", is_flag=True,
              help="Do not contact the remote: integrate what `git fetch` staged last.")
@JSON
@handled
def fetch_(remote_name: str | None, run_id: str | None, offline: bool, as_json: bool) -> None:
    """Fetch run logs; fast-forward local ones, report diverged ones (never overwrite)."""
    _show(rm.fetch(Path("."), remote_name, offline, run_id), as_json, "fetch")


@click.group("remote")
def remote_() -> None:
    """Configure remotes to carry run logs."""


@remote_.command("setup")
@click.argument("remote_name", metavar="REMOTE")
@JSON
@handled
def setup_(remote_name: str, as_json: bool) -> None:
    """Add log refspecs to remote.REMOTE.push and .fetch (idempotent)."""
    changes = rm.setup(Path("."), remote_name)
    if as_json:
        emit_json([{"key": c.key, "value": c.value, "added": c.added} for c in changes])
        return
    for c in changes:
        click.echo(f"{c.key} {c.value}" + ("" if c.added else "  (already set)"))
