"""`git wal order`: one order of every run's committed steps (gitwal/together/order.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pygit2

from ..base.display import safe
from ..base.errors import EXIT_ERROR, WalError
from ..base.repository import open_repository
from ..log.runs import list_runs
from ..remote.fetch import remote_heads
from ..together.order import order
from ..together.order import since as runs_since
from ..wal import Wal
from .failures import handled
from .options import JSON
from .stdout import emit_json


@click.command("order")
@click.option("--since", metavar="REF",
              help="Only the runs whose base is REF or a commit after it (default: every run).")
@click.option("--no-replay", is_flag=True,
              help="Do not compare the replayed post-states with the working tree.")
@click.option("--remote", metavar="NAME",
              help="Order every run the remote holds (fetched for reading only) instead of "
                   "this clone's.")
@JSON
@handled
def order_(since: str | None, no_replay: bool, remote: str | None, as_json: bool) -> None:
    """One order of every run's committed steps, from their hashes; conflicts named."""
    repo = open_repository(".", "run `git wal order` inside a clone")
    heads: dict[str, str] | None = None
    if remote is not None:
        remote, heads = remote_heads(Path("."), remote)
        repo = open_repository(".")  # reopened: the fetched objects are visible
        runs = sorted(heads)
    else:
        runs = [str(r) for r in list_runs(repo)]
    base = None
    if since is not None:
        try:
            base = str(repo.revparse_single(since).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError):
            raise WalError(f"no commit named {since!r}",
                           "pass a branch, tag or commit id") from None
        runs = runs_since(repo, runs, base, heads)
    found = order(repo, runs, None if no_replay else Wal(".").wt, base, heads)
    if as_json:
        emit_json(found.to_dict() | {"runs": runs, "remote": remote})
    else:
        for step in found.steps:
            paths = sorted({c.path for c in step.changes})
            shown = " ".join(safe(p) for p in paths[:6]) + (" ..." if len(paths) > 6 else "")
            click.echo(f"{safe(step.run)} {step.lsn:>6}  {step.tool:<12} {shown}")
        for c in found.conflicts:
            click.echo(f"conflict ({c.kind}): {safe(c.detail)}", err=True)
        for step in found.steps:
            for path, other, n in step.claimed:
                click.echo(f"claimed: run {safe(step.run)} LSN {step.lsn} changed "
                           f"{safe(path)}, claimed by run {safe(other)} (LSN {n})", err=True)
        for p in found.differ:
            click.echo(f"replay differs: {safe(p)} is not what the order leaves there",
                       err=True)
    if not found.ok:
        sys.exit(EXIT_ERROR)

