"""`git wal undo` and `git wal redo` (docs/undo.md): thin over gitwal/decisions/undo.py."""

from __future__ import annotations

import click

from ..base.display import safe
from ..decisions.undo import Undo, document, redo, undo
from ..wal import Wal
from .failures import handled
from .options import JSON, RUN
from .show import blob_change, diff_lines
from .stdout import emit_json
from .terminal import Paint, colour_wanted

FORCE = click.option("--force", is_flag=True,
                     help="Go ahead where a path changed since the log's last step there, "
                          "after storing what it holds in the log.")
DRY_RUN = click.option("--dry-run", is_flag=True,
                       help="Print the change as a unified diff; change nothing.")


def _report(wal: Wal, done: Undo, run: str, dry_run: bool, as_json: bool) -> None:
    data = document(wal.repo, done, run, dry_run)
    if as_json:
        emit_json(data)
        return
    if dry_run:
        paint = Paint(colour_wanted("auto"))
        for p, a, b in done.planned():
            for line in diff_lines(blob_change(wal.repo, p, a, b), paint):
                paint.echo(line)
        return
    what = (f"undid LSN {', '.join(map(str, done.lsns))}" if done.tool == "undo"
            else f"redid undo LSN {done.lsns[0]}")
    click.echo(f"{what} as LSN {done.lsn}: {', '.join(safe(p) for p in done.paths)}")
    for s in data["saved"]:
        click.echo(f"saved what {safe(s['path'])} held: `{safe(s['command'])}` brings it back")


@click.command("undo")
@RUN
@click.argument("lsns", nargs=-1, type=click.IntRange(min=1), metavar="[LSN]...")
@click.option("--to", "to", type=click.IntRange(min=0), metavar="LSN",
              help="Undo every step after LSN (back to the tree as of LSN).")
@click.option("--last", type=click.IntRange(min=1), metavar="N", help="Undo the newest N steps.")
@click.option("--to-checkpoint", is_flag=True,
              help="Undo every step after the newest checkpoint.")
@click.option("--turn", type=int, metavar="N",
              help="Undo what an agent did for its Nth prompt (1: the first, -1: the latest).")
@FORCE
@DRY_RUN
@JSON
@handled
def undo_(run_id: str | None, lsns: tuple[int, ...], to: int | None, last: int | None,
          to_checkpoint: bool, turn: int | None, force: bool, dry_run: bool,
          as_json: bool) -> None:
    """Undo committed steps (default: the newest), file and shell steps alike; logged."""
    chosen = sum(bool(x) for x in (lsns, to is not None, last, to_checkpoint,
                                   turn is not None))
    if chosen > 1:
        raise click.UsageError("name LSNs, or one of --to, --last, --to-checkpoint, --turn",
                               click.get_current_context())
    wal = Wal(".")
    run = wal.run(run_id)
    done = undo(run, lsns, to, last, to_checkpoint, force, dry_run, turn)
    _report(wal, done, run.id, dry_run, as_json)


@click.command("redo")
@RUN
@click.argument("lsn", required=False, type=click.IntRange(min=1), metavar="[UNDO-LSN]")
@FORCE
@DRY_RUN
@JSON
@handled
def redo_(run_id: str | None, lsn: int | None, force: bool, dry_run: bool,
          as_json: bool) -> None:
    """Take back an undo (default: the newest), putting back exactly what it replaced."""
    wal = Wal(".")
    run = wal.run(run_id)
    done = redo(run, lsn, force, dry_run)
    _report(wal, done, run.id, dry_run, as_json)
