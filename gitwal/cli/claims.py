"""`git wal claim` and `git wal release`: reserve paths against other runs' steps."""

from __future__ import annotations

import sys

import click

from .. import documents
from ..base.seconds import MAX_SECONDS
from ..decisions import claiming
from ..together import claims
from ..wal import Wal
from .failures import handled
from .options import JSON, RUN
from .stdout import emit_json


def _overlap_lines(found: list[tuple[claims.Live, str]], now: int) -> list[str]:
    return [f"{p} overlaps run {c.run}'s claim of {c.pattern!r} (LSN {c.lsn}, "
            f"{c.until - now} s more)" for c, p in found]


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--ttl", type=click.IntRange(min=1, max=MAX_SECONDS),
              default=claims.DEFAULT_TTL, show_default=True, metavar="SECONDS",
              help="How long the claim lasts (at most a year).")
@RUN
@JSON
@handled
def claim(paths: tuple[str, ...], ttl: int, run_id: str | None, as_json: bool) -> None:
    """Claim PATHs (paths or glob patterns) for the run: other runs' steps on
    them are refused (`git config wal.claims warn`: only warned about) until
    the claim expires, is released, or the run is sealed or dropped. With
    wal.remote, the claim is taken on the remote too, by compare-and-swap:
    refused, naming the holder, when another clone's run holds a path."""
    run = Wal(".").run(run_id)
    now = claims.now_s()
    rec, overlaps = claiming.claim(run, paths, ttl, now)
    if as_json:
        emit_json({"run": run.id, "lsn": rec.lsn, "paths": list(rec.paths), "at": rec.at,
                   "ttl": rec.ttl, "until": rec.at + rec.ttl,
                   "overlaps": [documents.claim(c) for c, _ in overlaps]})
        return
    click.echo(f"LSN {rec.lsn} claim {' '.join(rec.paths)}: for {ttl} s")
    for line in _overlap_lines(overlaps, now):
        print(f"warning: {line}", file=sys.stderr)


@click.command()
@click.argument("paths", nargs=-1)
@RUN
@JSON
@handled
def release(paths: tuple[str, ...], run_id: str | None, as_json: bool) -> None:
    """Release the run's claims of PATHs (default: all of them)."""
    run = Wal(".").run(run_id)
    rec = claiming.release(run, paths)
    if as_json:
        emit_json({"run": run.id, "lsn": None if rec is None else rec.lsn,
                   "paths": [] if rec is None else list(rec.paths)})
        return
    if rec is None:
        click.echo("nothing to release")
    else:
        click.echo(f"LSN {rec.lsn} release {' '.join(rec.paths)}")
