"""`git wal recover`, `resolve`, `approve` and `prompt`: deciding what is open."""

from __future__ import annotations

import os
import sys

import click

from ..base.errors import EXIT_IN_DOUBT
from ..records.model import calling_agent
from ..recovery.prompt import render
from ..wal import Wal
from .failures import handled
from .options import JSON, RUN
from .stdout import commands_to_stderr, emit_json

YES = click.option(
    "--yes", is_flag=True,
    help="A person decided: record it without asking on the terminal (/dev/tty). For a "
         "person's own script; never from an agent's tool call. Without a terminal and "
         "without --yes: refused, exit 1.")


@click.command()
@RUN
@click.option("--redo", is_flag=True, help="Redo replay-safe steps that did not land.")
@click.option("--restore", is_flag=True,
              help="Put paths an in-doubt shell step changed back to its pre tree.")
@JSON
@handled
def recover(run_id: str | None, redo: bool, restore: bool, as_json: bool) -> None:
    """Decide every open intent, repair, and print the resume prompt."""
    with commands_to_stderr(as_json):  # a redone step's output stays out of the JSON
        report = Wal(".").recover(run_id, redo=redo, restore=restore,
                                   inside=calling_agent(os.environ))
    if as_json:
        data = report.to_dict()
        data["prompt"] = render(report)
        emit_json(data)
    else:
        click.echo(render(report))
    if report.in_doubt:
        sys.exit(EXIT_IN_DOUBT)


@click.command()
@RUN
@click.argument("lsn", type=click.IntRange(min=1))
@click.option("--applied", is_flag=True,
              help="The step happened: accept the tree as it is now (a commit).")
@click.option("--not-applied", is_flag=True,
              help="The step did not happen: close it (an abort); nothing is written.")
@click.option("--note", default="", metavar="TEXT", help="Why: kept in the record.")
@YES
@JSON
@handled
def resolve(run_id: str | None, lsn: int, applied: bool, not_applied: bool, note: str,
            yes: bool, as_json: bool) -> None:
    """Close an open (in-doubt) step by a person's decision, recorded with who and why."""
    if applied == not_applied:
        raise click.UsageError("say what happened: --applied or --not-applied (one of them)",
                               click.get_current_context())
    from ..decisions.resolve import resolve as decide

    done = decide(Wal(".").run(run_id), lsn, applied, note, yes=yes)
    if as_json:
        emit_json(done.to_dict())
        return
    what = "applied (committed as found)" if applied else "not applied (aborted; the tree " \
        "was left as found)"
    click.echo(f"LSN {done.lsn} of run {done.run}: decided {what} by {done.decided_by}, "
               f"record LSN {done.record}")


@click.command()
@RUN
@click.argument("lsn", type=click.IntRange(min=1))
@click.option("--note", default="", metavar="TEXT", help="Why: kept in the record.")
@YES
@JSON
@handled
def approve(run_id: str | None, lsn: int, note: str, yes: bool, as_json: bool) -> None:
    """Approve an irreversible step waiting for a person (recorded with who and why)."""
    from ..decisions.approvals import approve as approving

    run = Wal(".").run(run_id)
    rec = approving(run, lsn, note, yes=yes)
    if as_json:
        emit_json({"run": run.id, "lsn": rec.intent, "record": rec.lsn,
                   "approved_by": rec.approved_by, "note": rec.note})
        return
    click.echo(f"LSN {rec.intent} of run {run.id}: approved by {rec.approved_by} (record LSN "
               f"{rec.lsn}); run the same command again, or `git wal recover --run {run.id} "
               "--redo`, to run it once")


@click.command()
@RUN
@handled
def prompt(run_id: str | None) -> None:
    """Print the resume prompt alone (changes nothing)."""
    click.echo(render(Wal(".").report(run_id)))
