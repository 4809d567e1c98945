"""`git wal help [COMMAND]...`: a command's help, as `git wal COMMAND -h`.

git hands `git wal --help` to `man git-wal` (the page gitwal installs,
cli/manpage.py); this command needs no man page.
"""

from __future__ import annotations

import difflib

import click

from ..base.errors import EXIT_USAGE
from .failures import fail


def _names(ctx: click.Context, param: click.Parameter, incomplete: str
           ) -> list[click.shell_completion.CompletionItem]:
    """Completion: the subcommands of the command named so far."""
    group: click.Command = ctx.find_root().command
    for name in ctx.params.get("names") or ():
        sub = group.get_command(ctx, name) if isinstance(group, click.Group) else None
        if sub is None:
            return []
        group = sub
    if not isinstance(group, click.Group):
        return []
    return [click.shell_completion.CompletionItem(n) for n in group.list_commands(ctx)
            if n.startswith(incomplete)]


@click.command("help")
@click.argument("names", nargs=-1, metavar="[COMMAND]...", shell_complete=_names)
@click.pass_context
def help_(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Show the help of git wal, or of COMMAND (`git wal help apply write-file`)."""
    at = ctx.find_root()
    for i, name in enumerate(names):
        command = at.command
        sub = command.get_command(at, name) if isinstance(command, click.Group) else None
        if sub is None:
            shown = " ".join(("git wal help", *names[:i]))  # the help of the part that exists
            if not isinstance(command, click.Group):
                fail(f"`{at.command_path}` has no subcommand {name!r}", f"`{shown}` shows "
                     "its help", EXIT_USAGE)
            near = difflib.get_close_matches(name, command.list_commands(at), n=1)
            where = "" if i == 0 else f" in `{at.command_path}`"
            fail(f"No such command {name!r}{where}."
                 + (f" Did you mean {near[0]!r}?" if near else ""),
                 f"`{shown}` lists the commands", EXIT_USAGE)
        at = click.Context(sub, info_name=name, parent=at)
    click.echo(at.get_help())
