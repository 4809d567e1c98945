"""`git wal repair RUN`: cut a damaged log back to its newest intact append."""

from __future__ import annotations

import click

from .. import repair as repairing
from ..errors import UnknownRun
from ..ids import RunId, valid_run_id
from ..store import Store
from ..wal import Wal
from . import emit_json, handled
from .options import JSON


@click.command()
@click.argument("run_id", metavar="RUN")
@JSON
@handled
def repair(run_id: str, as_json: bool) -> None:
    """Cut a damaged log (missing objects) back to its newest intact record."""
    wal = Wal(".")
    if not valid_run_id(run_id) or not (store := Store(wal.repo, RunId(run_id))).exists():
        raise UnknownRun(f"no run {run_id}", "list runs with `git wal runs`")
    r = repairing.repair(store)
    if as_json:
        emit_json(r.to_dict())
        return
    lost = ", ".join(map(str, r.lost)) or "none known"
    click.echo(f"run {r.run} repaired: the log now ends at LSN {r.kept} "
               f"(append {r.head[:12]})")
    click.echo(f"  lost LSN: {lost}")
    click.echo(f"  because: {r.reason}")
    click.echo(f"  kept under {r.archive}: what survived ({r.salvaged} object(s)) and "
               f"repair.json naming the damaged head {r.damaged_head[:12]}")
    click.echo(f"  next: `git wal recover --run {r.run}` decides any step left open")
