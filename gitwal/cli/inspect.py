"""`git wal log`, `status`, `runs`: read-only views of the logs (the text of
`log`, a timeline for people: timeline.py)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from .. import documents
from ..base.display import safe
from ..records.rows import log_rows
from ..wal import Wal
from .failures import handled
from .options import JSON, RUN, VIEW
from .stdout import emit_json


def _compact(row: dict[str, Any]) -> bytes:
    """The same canonical form the records are stored in."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@click.command()
@RUN
@click.option("--all", "everything", is_flag=True,
              help="Include segments archived by `git wal compact`.")
@click.option("--records", "per_record", is_flag=True,
              help="One line per record: closing records on lines of their own.")
@JSON
@VIEW
@handled
def log(run_id: str | None, everything: bool, per_record: bool, as_json: bool,
        color: str, no_color: bool, no_pager: bool) -> None:
    """Show the run's steps, oldest first: one line per step, with its time,
    outcome and duration (`--json`: every record)."""
    wal = Wal(".")
    if as_json:
        stream = (iter(wal.history(run_id)) if everything
                  else wal.run(run_id, read_only=True).stream())
        out = sys.stdout.buffer
        for row in log_rows(stream):
            out.write(row if isinstance(row, bytes) else _compact(row))
            out.write(b"\n")
        return
    from .timeline import timeline  # the views for people load only here

    timeline(wal, run_id, everything, per_record, color, no_color, no_pager)


@click.command()
@RUN
@JSON
@handled
def status(run_id: str | None, as_json: bool) -> None:
    """Committed, aborted and open intents, and the next LSN."""
    st = Wal(".").status(run_id)
    if as_json:
        emit_json(documents.status(st))
        return
    click.echo(f"run {st.run}: {safe(st.task)}")
    if st.worktree is not None:
        click.echo(f"  worktree: {_shown(st.worktree[1])}" + (
            f" ({_shown(st.worktree[0])})" if st.worktree[0] else ""))
    if st.sealed:
        click.echo(f"  sealed at LSN {st.sealed}: finished, nothing may be appended")
    if st.checkpoint:
        click.echo(f"  newest checkpoint: LSN {st.checkpoint} (counts below are after it)")
    click.echo(f"  {len(st.committed)} committed, {len(st.aborted)} aborted, "
               f"{len(st.open)} open; next LSN {st.next_lsn}")
    if st.open:
        click.echo(f"  open intents: {', '.join(map(str, st.open))} "
                   f"(run `git wal recover --run {st.run}`)")
    if st.unlogged:
        click.echo(f"  unlogged: changes with no durable intent recorded at LSN "
                   f"{', '.join(map(str, st.unlogged))} (`git wal log` shows the paths)")
    if st.remote is not None:
        r = st.remote
        click.echo(f"  remote {_shown(r.name)}: " + (
            "every append is on it" if r.behind == 0 else
            f"{r.behind} append(s) not on it yet"))
        if r.error is not None and r.error_at is not None:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.error_at))
            click.echo(f"  last push error ({when}): {_shown(r.error)}")
    if st.prediction_miss:
        click.echo(f"  prediction miss: intents {', '.join(map(str, st.prediction_miss))} "
                   "committed what was observed, not what was predicted")


@click.command()
@JSON
@handled
def runs(as_json: bool) -> None:
    """List runs with a log in this repository, oldest first."""
    found = Wal(".").runs()
    if as_json:  # one document, `[]` when there is no run (docs/json.md)
        emit_json([documents.run_info(info) for info in found])
        return
    for info in found:
        mark = "*" if info.current else " "
        if info.damaged is not None:
            click.echo(f"{mark} {info.run}  DAMAGED: {_shown(info.damaged)} "
                       f"(`git wal repair {info.run}`)")
            continue
        flag = f"  {len(info.open)} open" if info.open else ""
        where = f"  [{_shown(info.worktree[1])}]" if info.worktree is not None else ""
        click.echo(f"{mark} {info.run}  {info.records} records{flag}  {safe(info.task)}{where}")
        for c in info.claims:
            click.echo(f"    claims {_shown(c.pattern)} (LSN {c.lsn}, until "
                       f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(c.until))})")
        for rc, trusted in info.remote_claims:
            if rc.run != info.run:
                click.echo(f"    on {_shown(rc.remote)}: {_shown(rc.pattern)} claimed by run "
                           f"{_shown(rc.run)} of clone {rc.clone}"
                           f"{'' if trusted else ' (unsigned or untrusted: warns only)'}")


def _shown(text: str) -> str:
    """Text read from a log, safe on a terminal (no control characters)."""
    return text if text.isprintable() else repr(text)
