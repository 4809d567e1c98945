"""Options several commands share, defined once so their names and help agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..base.errors import WalError
from ..base.seconds import seconds

F = TypeVar("F", bound=Callable[..., Any])


class Seconds(click.ParamType[float]):
    """A number of seconds, checked by gitwal/base/seconds.py (NaN, infinity and more
    than a year refused) before the command logs anything."""

    name = "seconds"

    def __init__(self, zero: bool) -> None:
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            return seconds(value, "", "", self.zero)
        except WalError as e:
            self.fail(e.message, param, ctx)


RUN = click.option("--run", "run_id", metavar="ID", help="Run id (default: the current run).")
CHECK = click.option("--check", metavar="CMD",
                     help="Verification command; the step commits only if it exits 0.")
JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
TIMEOUT = click.option(
    "--timeout", type=Seconds(zero=False), metavar="SECONDS",
    help="Kill the command or check (its whole process group) after SECONDS and "
         "abort the step (default: git config wal.commandTimeout, else no limit).")
WAIT = click.option("--wait-timeout", "wait_timeout", type=Seconds(zero=True),
                    metavar="SECONDS",
                    help="Give up (exit 4) when another process holds the run longer "
                         "(default: git config wal.waitTimeout, else wait).")
STEP = click.option("--step", "step", type=click.IntRange(min=1), metavar="N",
                    help="The plan step (1-based) this step carries out.")


def VIEW(fn: F) -> F:
    """``--color``, ``--no-color`` and ``--no-pager`` of the views for people
    (`log`, `show`; cli/terminal.py applies them)."""
    fn = click.option("--no-pager", "no_pager", is_flag=True,
                      help="Do not pipe the output into a pager.")(fn)
    fn = click.option("--no-color", "no_color", is_flag=True,
                      help="Same as --color=never.")(fn)
    return click.option("--color", "color", type=click.Choice(["auto", "always", "never"]),
                        default="auto", show_default=True,
                        help="Colour the output: on a terminal (auto, unless NO_COLOR is "
                             "set), always or never.")(fn)
