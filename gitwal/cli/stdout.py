"""What reaches stdout: under ``--json`` the one document (``emit_json``), with
the output of the commands gitwal starts moved to stderr meanwhile
(``commands_to_stderr``); and a quiet end when stdout's reader goes away
(``closed_stdout``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any, NoReturn


def closed_stdout() -> NoReturn:
    """The reader of our output went away (`git wal log | head -1`): end quietly.

    git's convention: the process dies of SIGPIPE, with no message (the shell
    reports 141). Whatever the command did is as durable as if it had
    printed its result.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError):
        pass
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(141)


def emit_json(data: Any) -> None:
    """One document on stdout (docs/json.md): one line, keys sorted. Written
    as it is encoded: no copy of the whole document in memory (a long run's
    report lists every committed step)."""
    json.dump(data, sys.stdout, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


@contextlib.contextmanager
def commands_to_stderr(active: bool) -> Iterator[None]:
    """Under ``--json`` the document is the only thing on stdout: while the
    body runs (an `exec` step, a `--check`, a redone step), fd 1 is a copy of
    fd 2, which the commands gitwal starts inherit, so what they print goes
    to stderr, where people still see it (docs/json.md).

    Python's own stdout is flushed first, so nothing written before lands
    after the swap; fd 1 is put back even when the body raises (the error
    document that follows must reach stdout).
    """
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
