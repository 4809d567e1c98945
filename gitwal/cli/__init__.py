"""`git wal`: a thin click layer over the library. Each command parses its
arguments, calls one library function, and prints the result (``--json`` for
tools). Errors become ``error: ...`` / ``hint: ...`` on stderr and a
documented exit code, never a traceback. A command's module is imported only
when that command runs (:data:`COMMANDS`, cli/lazy.py).

What every command shares: ``failures`` (``handled``, ``fail``: a failure as
`error:`/`hint:` and an exit code) and ``stdout`` (``emit_json``,
``commands_to_stderr``: the one document under ``--json``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..base.errors import EXIT_ERROR, EXIT_USAGE
from .failures import fail
from .lazy import LazyGroup
from .stdout import closed_stdout


def refuse_unsupported_platform() -> None:
    """gitwal needs POSIX (directory descriptors, ``O_NOFOLLOW``, fsync of
    directories, process groups): elsewhere say so before anything runs."""
    if sys.platform == "win32" or os.name != "posix":
        fail(f"gitwal does not run on this platform ({sys.platform})",
             "gitwal supports Linux (README \"Supported platforms\"); on Windows, "
             "run it inside WSL 2", EXIT_ERROR)


class WalGroup(LazyGroup):
    """Usage errors, too, print `error:` and `hint:` (exit 2)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        refuse_unsupported_platform()
        kwargs["standalone_mode"] = False
        kwargs.setdefault("prog_name", "git wal")
        # click would derive "_GIT WAL_COMPLETE" from the name (cli/completion.py).
        kwargs.setdefault("complete_var", "_GIT_WAL_COMPLETE")
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as e:
            # Not `--help`: git hands `git wal --help` to man (cli/manpage.py).
            path = e.ctx.command_path if e.ctx else "git wal"
            fail(e.format_message(), f"see `{path} -h`", EXIT_USAGE, "UsageError")
        except click.ClickException as e:
            fail(e.format_message(), "", e.exit_code)
        except click.Abort:
            fail("aborted", "", EXIT_ERROR)
        except BrokenPipeError:
            closed_stdout()
        sys.exit(code if isinstance(code, int) else 0)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.epilog is None:
            from .examples import EXAMPLES

            command.epilog = EXAMPLES.get(cmd_name)
        return command


# Every subcommand: name -> "module:attribute" of its click command.
COMMANDS = {
    "agent-server": ".agents:agent_server",
    "apply": ".steps:apply",
    "approve": ".recover:approve",
    "begin": ".steps:begin",
    "checkpoint": ".checkpoints:checkpoint_",
    "claim": ".claims:claim",
    "completion": ".completion:completion",
    "compact": ".checkpoints:compact",
    "doctor": ".doctor:doctor_",
    "drop": ".checkpoints:drop_",
    "exec": ".steps:exec_",
    "fetch": ".remote:fetch_",
    "gate": ".checkpoints:gate",
    "help": ".help:help_",
    "hook": ".agents:hook",
    "hooks": ".hooks:hooks",
    "install": ".agents:install_",
    "keygen": ".keys:keygen",
    "log": ".inspect:log",
    "mcp": ".mcp:mcp_",
    "mcp-config": ".mcp:mcp_config",
    "order": ".order:order_",
    "prompt": ".recover:prompt",
    "push": ".remote:push_",
    "recover": ".recover:recover",
    "redo": ".undo:redo_",
    "release": ".claims:release",
    "remote": ".remote:remote_",
    "repair": ".repair:repair",
    "resolve": ".recover:resolve",
    "resume": ".resume:resume_",
    "runs": ".inspect:runs",
    "seal": ".seal:seal",
    "show": ".show:show",
    "status": ".inspect:status",
    "trust": ".keys:trust_",
    "undo": ".undo:undo_",
    "uninstall": ".agents:uninstall_",
    "verify": ".verify:verify_",
}


@click.group(cls=WalGroup, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]},
             epilog="`git wal help COMMAND` or `git wal COMMAND -h` shows a command's help; "
                    "`git wal --help` opens the manual page, git-wal(1).")
@click.version_option(package_name="gitwal")
def main() -> None:
    """A write-ahead log for coding agents, kept in git (refs/wal/<run>)."""
    from ..base import progress
    from ..base.repository import bound_memory

    bound_memory()
    progress.enable()  # a status line for long work, on a terminal only


__all__ = ["COMMANDS", "main"]
