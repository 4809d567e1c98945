"""`git wal recover` and `git wal prompt`."""

from __future__ import annotations

import os
import sys

import click

from ..errors import EXIT_IN_DOUBT
from ..prompt import render
from ..records.model import calling_agent
from ..wal import Wal
from . import commands_to_stderr, emit_json, handled
from .options import JSON, RUN


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
@handled
def prompt(run_id: str | None) -> None:
    """Print the resume prompt alone (changes nothing)."""
    click.echo(render(Wal(".").report(run_id)))
