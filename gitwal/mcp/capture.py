"""What a command prints while a step runs, captured for the model.

The server's stdin and stdout carry the protocol; a command a step runs
inherits fds 1 and 2, so while it runs they point at a temporary file, and
the model gets the last ``OUTPUT_TAIL`` characters. The server's own log
lines keep a descriptor of their own (``isolate_stderr``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

OUTPUT_TAIL = 8000  # characters of a command's output returned to the model


@dataclass
class Captured:
    text: str = ""


@contextlib.contextmanager
def captured_output() -> Iterator[Captured]:
    """Point fds 1 and 2 at a temporary file while a step runs a command.

    Commands inherit the server's standard streams (commands.run_command). The
    protocol itself never goes through fd 1 while serving (the SDK writes to a
    private duplicate), and the server's own messages go to ``sys.stderr``,
    which ``isolate_stderr`` moved off fd 2; so the file receives exactly what
    the command and its children print. Calls are serialized: one capture at
    a time.
    """
    out = Captured()
    with tempfile.TemporaryFile() as f:
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            yield out
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 4 * OUTPUT_TAIL))
            out.text = f.read().decode("utf-8", "replace")[-OUTPUT_TAIL:]


def isolate_stderr() -> None:
    """Give Python's ``sys.stderr`` its own descriptor, so that redirecting
    fd 2 for a command's output never captures the server's log lines."""
    sys.stderr.flush()
    sys.stderr = open(os.dup(2), "w", buffering=1, encoding="utf-8",  # noqa: SIM115
                      errors="replace")
