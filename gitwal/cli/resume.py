"""`git wal resume RUN`: take a run over from its remote into this clone."""

from __future__ import annotations

import click

from ..recovery.prompt import render
from ..wal import Wal
from .failures import handled
from .options import JSON
from .stdout import emit_json


@click.command("resume")
@click.argument("run_id", metavar="RUN")
@click.option("--remote", metavar="NAME",
              help="The remote that holds the run (default: the run's remote, wal.remote, "
                   "the branch's upstream remote, else origin).")
@JSON
@handled
def resume_(run_id: str, remote: str | None, as_json: bool) -> None:
    """Take RUN over from its remote: fetch it, fence the clone that had it, put
    the tree at its last committed step, decide its open intent, print the
    resume prompt."""
    done = Wal(".").resume(run_id, remote)
    if as_json:
        emit_json(done.to_dict())
        return
    click.echo(f"run {done.run}: taken over from {done.remote} at "
               f"{done.taken_from[:12]} (takeover LSN {done.takeover})", err=True)
    if done.closed is not None:
        what = ("in doubt: its command may have run on the machine that lost the run"
                if done.closed.tool == "exec" else "not applied here: redo it")
        click.echo(f"LSN {done.closed.lsn} ({done.closed.tool} "
                   f"{' '.join(done.closed.target)}) was open: {what}", err=True)
    click.echo(f"{len(done.written)} path(s) put at the run's last committed step", err=True)
    for path, why in done.skipped:
        click.echo(f"warning: {path} not written: {why}", err=True)
    for path in done.missing:
        click.echo(f"warning: {path}: the log withholds its bytes (a secret); not written",
                   err=True)
    click.echo(render(done.report))
