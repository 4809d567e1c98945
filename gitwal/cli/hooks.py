"""`git wal hooks install|uninstall|check`: gitwal's git hooks."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..base.errors import StepFailed, UnknownRun
from ..githooks import install as githooks
from ..records.model import Intent
from ..wal import Wal
from .failures import handled
from .options import JSON
from .stdout import emit_json


@click.group()
def hooks() -> None:
    """Git hooks that refuse rewriting logs and committing half-applied steps."""


def _show(changes: list[githooks.HookChange], as_json: bool) -> None:
    if as_json:
        emit_json([{"hook": c.hook, "action": c.action, "manager": c.manager,
                    "config": c.config, "entry": c.entry, "why": c.why} for c in changes])
        return
    for c in changes:
        if c.action == "add-to-manager":
            click.echo(f"{c.hook}: run by {c.manager}; gitwal wrote nothing. Add to "
                       f"{c.config}:\n" + "\n".join("    " + ln for ln in
                                                    (c.entry or "").splitlines()))
        elif c.action == "via-manager":
            click.echo(f"{c.hook}: run by {c.manager} ({c.config} runs gitwal's hook)")
        elif c.action in ("unavailable", "overwritten"):
            click.echo(f"{c.hook}: {c.action}: {c.why}")
            if c.entry:
                click.echo(f"  add to {c.config}:\n" + "\n".join(
                    "    " + ln for ln in c.entry.splitlines()))
        else:
            click.echo(f"{c.hook}: {c.action}")


@hooks.command()
@JSON
@handled
def install(as_json: bool) -> None:
    """Install the hooks (existing hooks are kept and chained); idempotent."""
    _show(githooks.install(Path(".")), as_json)


@hooks.command()
@JSON
@handled
def uninstall(as_json: bool) -> None:
    """Remove gitwal's hooks and restore the ones they chained to."""
    _show(githooks.uninstall(Path(".")), as_json)


@hooks.command()
@JSON
@handled
def status(as_json: bool) -> None:
    """Show what runs each of gitwal's hooks here: gitwal's own script, a
    hook manager (husky, lefthook, pre-commit), or nothing; exit 1 when one
    is missing, overwritten, or waits for its entry in the manager's file
    (a hook the manager cannot run at all is reported, not an error)."""
    states = githooks.status(Path("."))
    _show(states, as_json)
    if any(c.action not in ("installed", "chained", "via-manager", "unavailable")
           for c in states):
        sys.exit(1)


@hooks.command(context_settings={"ignore_unknown_options": True})
@click.argument("hook", type=click.Choice(githooks.ALL_HOOKS))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@handled
def run(hook: str, args: tuple[str, ...]) -> None:
    """Run gitwal's git hook HOOK with ARGS and this stdin: the entry a hook
    manager's configuration calls (`git wal hooks install` prints it)."""
    import os  # exec: the hook's exit status is this command's

    os.execvp("sh", ["sh", str(githooks.script_path(hook)), *args])


@hooks.command()
@handled
def check() -> None:
    """Exit 1 if an intent of the current run is open (for pre-commit frameworks)."""
    wal = Wal(".")
    try:
        run = wal.run()
    except UnknownRun:
        return
    head = run.store.head()
    last = run.store.head_records(head)[-1] if head else None
    if isinstance(last, Intent):
        raise StepFailed(
            f"intent LSN {last.lsn} of run {run.id} is open: a commit now would checkpoint "
            "a half-applied step",
            f"run `git wal recover --run {run.id}` first",
        )


@hooks.command("receive-signatures", hidden=True)
@click.option("--allowed-signers", metavar="PATH", type=click.Path(path_type=Path),
              help="ssh allowed-signers file.")
@click.option("--require-signed", is_flag=True, help="Refuse unsigned appends too.")
@handled
def receive_signatures(allowed_signers: Path | None, require_signed: bool) -> None:
    """For the pre-receive hook: stdin holds `REF COMMIT` lines of pushed appends."""
    pairs = []
    for line in sys.stdin.read().splitlines():
        ref, _, commit = line.strip().partition(" ")
        if commit:
            pairs.append((ref, commit))
    problems = githooks.push_signature_problems(Path("."), pairs, allowed_signers,
                                                require_signed)
    for ref, commit, why in problems:
        click.echo(f"gitwal: refusing {ref}: append {commit[:12]}: {why}", err=True)
    if problems:
        sys.exit(1)
