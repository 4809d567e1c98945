"""`git wal seal`: end a run with a signed seal record."""

from __future__ import annotations

import click

from ..checkpoints import seal as sealing
from ..wal import Wal
from .failures import handled
from .options import JSON, RUN, WAIT
from .stdout import emit_json


@click.command()
@RUN
@WAIT
@JSON
@handled
def seal(run_id: str | None, wait_timeout: float | None, as_json: bool) -> None:
    """Append the run's final, signed seal record; nothing may be appended after it."""
    r = sealing.seal(Wal(".").run(run_id, wait_timeout=wait_timeout))
    if as_json:
        emit_json({"lsn": r.lsn, "last": r.last, "head": r.head, "tree": r.tree,
                   "commit": r.commit, "fingerprint": r.fingerprint})
        return
    click.echo(f"LSN {r.lsn} seal: sealed after LSN {r.last} (append {r.head[:12]}), "
               f"tree {r.tree[:12]}, signed by {r.fingerprint}")
