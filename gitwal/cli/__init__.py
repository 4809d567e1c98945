"""`git wal`: a thin click layer over the library. Each command parses its
arguments, calls one library function, and prints the result (``--json`` for
tools). Errors become ``error: ...`` / ``hint: ...`` on stderr and a
documented exit code, never a traceback."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click
import pygit2

from ..errors import EXIT_ERROR, EXIT_USAGE, WalError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, hint: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def handled(fn: F) -> F:
    """Turn every failure into a message and an exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WalError as e:
            fail(e.message, e.hint, e.exit_code)
        except (pygit2.GitError, OSError) as e:
            fail(str(e) or type(e).__name__,
                 "nothing was changed by the failed operation; `git wal status` shows "
                 "the log", EXIT_ERROR)
        except KeyboardInterrupt:
            fail("interrupted", "`git wal recover` decides any step left open", 130)

    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, sort_keys=True, ensure_ascii=False))


class WalGroup(click.Group):
    """Usage errors, too, print `error:` and `hint:` (exit 2)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        kwargs.setdefault("prog_name", "git wal")
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as e:
            path = e.ctx.command_path if e.ctx else "git wal"
            fail(e.format_message(), f"see `{path} --help`", EXIT_USAGE)
        except click.ClickException as e:
            fail(e.format_message(), "", e.exit_code)
        except click.Abort:
            fail("aborted", "", EXIT_ERROR)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=WalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gitwal")
def main() -> None:
    """A write-ahead log for coding agents, kept in git (refs/wal/<run>)."""


from . import checkpoints, hooks, inspect, recover, steps, verify  # noqa: E402  (registers)

from . import remote  # noqa: E402, F401  # isort: skip  (registers push, fetch, remote)
from . import keys, seal  # noqa: E402, F401  # isort: skip  (registers keygen, trust, seal)
from . import mcp  # noqa: E402, F401  # isort: skip  (registers mcp, mcp-config)

__all__ = ["checkpoints", "hooks", "inspect", "main", "recover", "steps", "verify"]
from . import agents  # noqa: E402, F401  # isort: skip  (registers install, uninstall, hook)
from . import repair  # noqa: E402, F401  # isort: skip  (registers repair)
