"""`git wal begin`, `apply ...`, `exec`: commands that append steps."""

from __future__ import annotations

import sys
from typing import Any

import click

from .. import documents
from ..decisions import claiming
from ..run import Run, StepResult
from ..together import claims
from ..wal import Wal
from .failures import handled
from .options import CHECK, JSON, RUN, STEP, TIMEOUT, WAIT
from .stdout import commands_to_stderr, emit_json


@click.command()
@click.option("--task", default="", help="What the run is for (goes into the plan).")
@click.option("--run", "run_id", metavar="ID", help="Choose the run id yourself.")
@click.option("--step", "steps", multiple=True, metavar="TEXT",
              help="An intended step, in order (repeatable).")
@click.option("--claim", "claimed", multiple=True, metavar="PATH",
              help="Claim PATH (or a glob) for the run at once, for an hour (repeatable; "
                   "`git wal claim` sets another --ttl).")
@click.option("--remote", metavar="NAME",
              help="Push each append of this run to remote NAME as it is written "
                   "(this run only; `git config wal.remote NAME` does it for every run).")
@JSON
@handled
def begin(task: str, run_id: str | None, steps: tuple[str, ...], claimed: tuple[str, ...],
          remote: str | None, as_json: bool) -> None:
    """Start a run: write its plan and make it current; prints the run id."""
    if claimed:
        claims.check_patterns(claimed)  # a bad pattern fails before the run exists
    run = Wal(".").begin(task=task, run_id=run_id, steps=steps, remote=remote)
    overlaps: list[tuple[claims.Live, str]] = []
    if claimed:
        _, overlaps = claiming.claim(run, claimed)
    if as_json:
        doc: dict[str, Any] = {"run": run.id, "ref": run.store.ref_name, "task": task,
                               "steps": list(steps)}
        if claimed:
            doc["claims"] = list(claimed)
            doc["overlaps"] = [documents.claim(c) for c, _ in overlaps]
        emit_json(doc)
    else:
        click.echo(run.id)
    for c, p in overlaps:
        print(f"warning: {p} overlaps run {c.run}'s claim of {c.pattern!r} (LSN {c.lsn})",
              file=sys.stderr)


def _report(run: Run, result: StepResult, step: int | None, as_json: bool) -> None:
    if as_json:
        emit_json({"run": run.id, "lsn": result.lsn, "tool": result.tool,
                   "target": list(result.target), "step": step, "status": result.status,
                   "post": list(result.post)})
    else:
        click.echo(f"LSN {result.lsn} {result.tool} {' '.join(result.target)}: "
                   f"{result.status}")


@click.group()
@RUN
@CHECK
@TIMEOUT
@STEP
@WAIT
@JSON
@click.pass_context
def apply(ctx: click.Context, run_id: str | None, check: str | None, timeout: float | None,
          step: int | None, wait_timeout: float | None, as_json: bool) -> None:
    """Apply one end-state tool as a logged, verified step."""
    ctx.obj = {"run": run_id, "check": check, "timeout": timeout, "step": step,
               "json": as_json, "wait": wait_timeout}


def _apply(ctx: click.Context, tool: str, **args: Any) -> None:
    opts = ctx.obj
    run = Wal(".").run(opts["run"], wait_timeout=opts["wait"])
    with commands_to_stderr(opts["json"]):  # a --check's output stays out of the JSON
        result = run.apply(tool, check=opts["check"], step=opts["step"],
                           timeout=opts["timeout"], **args)
    _report(run, result, opts["step"], opts["json"])


@apply.command("write-file")
@click.argument("path")
@click.option("--from", "source", metavar="FILE|-", default="-", show_default=True,
              help="Where the new content comes from.")
@click.pass_context
@handled
def write_file(ctx: click.Context, path: str, source: str) -> None:
    """Set PATH to exactly the given content."""
    if source == "-":
        content = sys.stdin.buffer.read()
    else:
        with open(source, "rb") as f:
            content = f.read()
    _apply(ctx, "write_file", path=path, content=content)


@apply.command("replace-symbol")
@click.argument("path")
@click.argument("old")
@click.argument("new")
@click.pass_context
@handled
def replace_symbol(ctx: click.Context, path: str, old: str, new: str) -> None:
    """Rename identifier OLD to NEW in PATH (whole identifiers only)."""
    _apply(ctx, "replace_symbol", path=path, old=old, new=new)


@apply.command("replace-text")
@click.argument("path")
@click.option("--old", required=True, help="Exact text; must occur exactly once.")
@click.option("--new", required=True, help="Replacement text.")
@click.pass_context
@handled
def replace_text(ctx: click.Context, path: str, old: str, new: str) -> None:
    """Replace the single occurrence of --old in PATH with --new."""
    _apply(ctx, "replace_text", path=path, old=old, new=new)


@apply.command("ensure-line")
@click.argument("path")
@click.argument("line")
@click.pass_context
@handled
def ensure_line(ctx: click.Context, path: str, line: str) -> None:
    """Make sure PATH contains LINE (appended if missing)."""
    _apply(ctx, "ensure_line", path=path, line=line)


@apply.command("delete-file")
@click.argument("path")
@click.pass_context
@handled
def delete_file(ctx: click.Context, path: str) -> None:
    """Delete PATH."""
    _apply(ctx, "delete_file", path=path)


@apply.command("move-file")
@click.argument("src")
@click.argument("dst")
@click.pass_context
@handled
def move_file(ctx: click.Context, src: str, dst: str) -> None:
    """Move SRC to DST (DST must not exist)."""
    _apply(ctx, "move_file", src=src, dst=dst)


@click.command("exec", context_settings={"ignore_unknown_options": True})
@RUN
@CHECK
@TIMEOUT
@click.option("--idempotent", is_flag=True,
              help="Declare the command safe to run again (recovery may redo it).")
@STEP
@click.option("--watch", "watch", multiple=True, metavar="PATH",
              help="Include ignored files under PATH in the step's snapshots, so a "
                   "command that changes only those is seen (repeatable).")
@click.option("--confirm", metavar="CMD",
              help="A probe recovery runs if a crash leaves the step in doubt: exit 0, "
                   "it happened; 1, it did not; other, still in doubt.")
@click.option("--irreversible", is_flag=True,
              help="Log the step, then run it only once a person approved it (`git wal "
                   "approve LSN`; exit 3 until then); run the same command again to run it.")
@click.option("--allow-uncheckpointed", is_flag=True,
              help="With --irreversible: allow it although reversible steps since the "
                   "newest checkpoint are not behind one.")
@WAIT
@JSON
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@handled
def exec_(run_id: str | None, check: str | None, timeout: float | None, idempotent: bool,
          step: int | None, watch: tuple[str, ...], confirm: str | None, irreversible: bool,
          allow_uncheckpointed: bool, wait_timeout: float | None, as_json: bool,
          argv: tuple[str, ...]) -> None:
    """Run a shell command as a logged step (snapshots before and after)."""
    run = Wal(".").run(run_id, wait_timeout=wait_timeout)
    # Under --json the command's (and the check's) stdout goes to stderr: the
    # JSON document is all that stdout carries (docs/json.md, "exec").
    if allow_uncheckpointed and not irreversible:
        raise click.UsageError("--allow-uncheckpointed goes with --irreversible",
                               click.get_current_context())
    with commands_to_stderr(as_json):
        if irreversible:
            from ..decisions.approvals import exec_irreversible

            result = exec_irreversible(run, list(argv), check=check, step=step, watch=watch,
                                       timeout=timeout, confirm=confirm,
                                       allow_uncheckpointed=allow_uncheckpointed)
        else:
            result = run.exec(list(argv), check=check, idempotent=idempotent, step=step,
                              timeout=timeout, watch=watch, confirm=confirm)
    _report(run, result, step, as_json)
