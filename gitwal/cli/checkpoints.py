"""`git wal checkpoint`, `compact`, `gate`, `drop`."""

from __future__ import annotations

import sys

import click

from ..base.errors import EXIT_IN_DOUBT, UnknownRun
from ..checkpoints import checkpoint as cp
from ..wal import Wal
from .failures import handled
from .options import CHECK, JSON, RUN, WAIT
from .stdout import commands_to_stderr, emit_json


def _result(r: cp.CheckpointResult) -> dict[str, object]:
    return {"lsn": r.lsn, "git": r.git, "ref": r.ref, "covers": r.covers,
            "unlogged": list(r.unlogged), "reused_head": r.reused_head}


@click.command("checkpoint")
@RUN
@click.option("-m", "--message", metavar="MSG", help="Commit message (trailers are added).")
@CHECK
@click.option("--detached", is_flag=True,
              help="Keep the commit under refs/wal-checkpoints/ instead of on the branch.")
@click.option("--include-unlogged", is_flag=True,
              help="Commit changes no step explains too, and record their paths.")
@WAIT
@JSON
@handled
def checkpoint_(run_id: str | None, message: str | None, check: str | None, detached: bool,
                include_unlogged: bool, wait_timeout: float | None, as_json: bool) -> None:
    """Commit the working tree the log explains; append a checkpoint record."""
    with commands_to_stderr(as_json):  # a --check's output stays out of the JSON
        r = cp.checkpoint(Wal(".").run(run_id, wait_timeout=wait_timeout), message, check,
                          detached, include_unlogged)
    if as_json:
        emit_json(_result(r))
        return
    how = "HEAD already held this tree" if r.reused_head else f"commit {r.git[:12]}"
    click.echo(f"LSN {r.lsn} checkpoint: {how} on {r.ref}, covers LSN {r.covers}")
    if r.unlogged:
        click.echo(f"  included unlogged paths: {', '.join(r.unlogged)}")


@click.command()
@RUN
@click.option("--drop", "drop_", is_flag=True, help="Discard old records instead of archiving.")
@WAIT
@JSON
@handled
def compact(run_id: str | None, drop_: bool, wait_timeout: float | None,
            as_json: bool) -> None:
    """Start the live chain at the newest checkpoint (archive what came before)."""
    r = cp.compact(Wal(".").run(run_id, wait_timeout=wait_timeout), drop=drop_)
    if as_json:
        emit_json({"live_from": r.live_from, "archived": r.archived, "moved": r.moved})
    elif not r.moved:
        click.echo(f"nothing to do: the live chain already starts at LSN {r.live_from}")
    else:
        where = f"archived as {r.archived}" if r.archived else "dropped"
        click.echo(f"live chain now starts at LSN {r.live_from}; older records {where}")


@click.command()
@RUN
@click.option("--auto-checkpoint", is_flag=True, help="Checkpoint first when it safely can.")
@click.option("--detached", is_flag=True, help="With --auto-checkpoint: a detached checkpoint.")
@JSON
@handled
def gate(run_id: str | None, auto_checkpoint: bool, detached: bool, as_json: bool) -> None:
    """Exit 0 if compacting the agent's context is safe now, else 3 and why."""
    wal = Wal(".")
    try:
        run = wal.run(run_id)
    except UnknownRun:
        if run_id:
            raise
        run = None
    with commands_to_stderr(as_json):
        r = cp.gate(run, auto_checkpoint, detached)
    if as_json:
        # `checkpoint` names an LSN everywhere (docs/json.md): the one made here
        # is `checkpointed`, the document `checkpoint --json` prints.
        emit_json({"safe": r.safe, "reason": r.reason,
                   "checkpointed": None if r.checkpoint is None else _result(r.checkpoint)})
    else:
        click.echo(("safe: " if r.safe else "not safe: ") + r.reason,
                   err=not r.safe)
    if not r.safe:
        sys.exit(EXIT_IN_DOUBT)


@click.command("drop")
@click.argument("run_id", metavar="RUN")
@WAIT
@handled
def drop_(run_id: str, wait_timeout: float | None) -> None:
    """Delete a run's live log on purpose (archived first, never lost)."""
    wal = Wal(".")
    name = cp.drop(wal.run(run_id, wait_timeout=wait_timeout))
    wal.forget_current(run_id)
    click.echo(f"run {run_id} dropped; its records are kept under {name}")
