"""Colour and the pager of the views for people (`git wal log`, `show`), by
git's rules.

Colour: only on a terminal (``--color=auto``, the default) that is not
``TERM=dumb``, never when ``NO_COLOR`` is set to anything but the empty
string (https://no-color.org);
``--color=always|never`` and ``--no-color`` override both (the options:
cli/options.py ``VIEW``).

Pager: only when stdout is a terminal and ``--no-pager`` was not given. The
command is the first set of ``GIT_PAGER``, ``core.pager`` (git config),
``PAGER``, else ``less``; the empty string or ``cat`` means none. It runs
with ``sh -c``, as git runs it, with ``LESS=FRX`` and ``LV=-c`` unless they
are set: ``less`` quits at once when the text fits the screen, keeps colour
and leaves the screen as it was. Every pager command is the local user's
(their environment or config): nothing read from a log chooses one.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import click
import pygit2


def colour_wanted(choice: str, no_color: bool = False) -> bool:
    if no_color or choice == "never":
        return False
    if choice == "always":
        return True
    if os.environ.get("NO_COLOR", "") != "" or os.environ.get("TERM") == "dumb":
        return False
    return _stdout_is_terminal()


def _stdout_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdout.fileno())
    except (OSError, ValueError):
        return False


class Paint:
    """Colours text when enabled; the identity otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, colour: str | None) -> str:
        if not self.enabled or colour is None:
            return text
        if colour == "bold":
            return click.style(text, bold=True)
        return click.style(text, fg=colour)

    def echo(self, line: str) -> None:
        click.echo(line, color=self.enabled)


def pager_command(config: pygit2.Config | None) -> str | None:
    """The pager git would start (module docstring); None: no pager."""
    command = os.environ.get("GIT_PAGER")
    if command is None and config is not None:
        try:
            value = config["core.pager"] if "core.pager" in config else None  # noqa: SIM401
        except (KeyError, ValueError, pygit2.GitError):
            value = None
        command = value if isinstance(value, str) else None
    if command is None:
        command = os.environ.get("PAGER")
    if command is None:
        command = "less"
    return None if command.strip() in ("", "cat") else command


@contextlib.contextmanager
def paged(enabled: bool, config: pygit2.Config | None) -> Iterator[None]:
    """While the body runs, stdout goes into the pager (when one applies);
    afterwards the pager is waited for, as git waits for it."""
    command = pager_command(config) if enabled and _stdout_is_terminal() else None
    if command is None:
        yield
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    sys.stdout.flush()
    try:
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        yield  # no shell to run it with: print directly
        return
    assert proc.stdin is not None
    saved = os.dup(1)
    os.dup2(proc.stdin.fileno(), 1)
    proc.stdin.close()
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):  # the pager quit early: drop what is left
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
        os.dup2(saved, 1)  # the pager sees end of input: fd 1 was its last writer
        os.close(saved)
        proc.wait()
