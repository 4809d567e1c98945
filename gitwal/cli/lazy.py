"""A click group that imports a subcommand's module only when it is needed.

``git wal status`` should not pay for importing the verifier, the signing
code or the MCP server: each subcommand is named by ``"module:attribute"``
and its module is imported when that command runs, or when ``--help`` lists
the commands (it needs their help text).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})  # command name -> "module:attribute" (module relative)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.load(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def load(self, cmd_name: str) -> click.Command:
        module, _, attribute = self.lazy[cmd_name].partition(":")
        command = getattr(importlib.import_module(module, __package__), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            name = getattr(e, "command_name", None)  # NoSuchCommand (click >= 8.4)
            if not isinstance(name, str):
                raise
            # "Did you mean ...?" from every command, not only the imported ones.
            raise click.exceptions.NoSuchCommand(
                name, possibilities=self.list_commands(ctx), ctx=ctx) from None
