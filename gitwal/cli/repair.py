"""`git wal repair RUN`: cut a damaged log back to its newest intact append."""

from __future__ import annotations

import click

from ..wal import Wal
from .failures import handled
from .options import JSON
from .stdout import emit_json


@click.command()
@click.argument("run_id", metavar="RUN")
@JSON
@handled
def repair(run_id: str, as_json: bool) -> None:
    """Cut a damaged log (missing objects) back to its newest intact record."""
    r = Wal(".").repair(run_id)
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
