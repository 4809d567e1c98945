"""Progress of long work, for a person at a terminal: one status line on stderr.

Off unless the command line turns it on (:func:`enable`, when stderr is a
terminal and ``TERM`` is not ``dumb``): a library caller, an agent's hook, a
CI log never sees it. A line appears only once the work has lasted
``DELAY`` seconds (``GITWAL_PROGRESS_DELAY`` overrides it; ``0`` draws every
update at once, which is what tests read), is redrawn at most ten times a
second, and is erased when the work ends, so a quick command prints nothing
extra. Work that has steps to count
reports them (:meth:`Status.update`); work that has none (a snapshot of a
large tree) shows its elapsed time (``status(..., tick=True)``).

:func:`run_git` runs a git transfer (push, fetch) with git's own progress
turned into the status line, keeping git's stderr for error messages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TextIO

__all__ = ["DELAY", "Status", "disable", "enable", "enabled", "run_git", "status"]

DELAY = 1.0  # seconds of work before a line is shown
_REDRAW = 0.1  # seconds between two redraws
_ERASE = "\r\x1b[K"  # carriage return + erase line: the next line overwrites this one

_stream: TextIO | None = None


def enable(stream: TextIO | None = None) -> bool:
    """Show progress on ``stream`` (stderr) if it is a terminal; whether it is on."""
    global _stream
    stream = stream if stream is not None else sys.stderr
    try:
        tty = os.isatty(stream.fileno())
    except (OSError, ValueError, AttributeError):
        tty = False
    _stream = stream if tty and os.environ.get("TERM") != "dumb" else None
    return _stream is not None


def disable() -> None:
    global _stream
    _stream = None


def enabled() -> bool:
    return _stream is not None


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("GITWAL_PROGRESS_DELAY", DELAY)))
    except ValueError:
        return DELAY


class Status:
    """The status line of one piece of work (drawn only when progress is on)."""

    def __init__(self, what: str, stream: TextIO | None) -> None:
        self.what = what
        self._stream = stream
        self._start = time.monotonic()
        self._delay = _delay()
        self._detail = ""
        self._drawn = 0.0  # when the line was last drawn (0: never)
        self._lock = threading.Lock()

    def update(self, detail: str) -> None:
        """Say where the work is (``[3/10] run-1: chain check``)."""
        self._detail = detail
        self._draw(force=False)

    def _draw(self, force: bool) -> None:
        if self._stream is None:
            return
        now = time.monotonic()
        if now - self._start < self._delay:
            return
        if not force and self._delay and now - self._drawn < _REDRAW:
            return  # (a delay of 0 draws every update: what tests read)
        with self._lock:
            seconds = int(now - self._start)
            line = f"gitwal: {self.what}" + (f" {self._detail}" if self._detail else "")
            line += f" ({seconds}s)" if seconds else ""
            width = _width(self._stream)
            self._stream.write(_ERASE + line[:width - 1])
            self._stream.flush()
            self._drawn = now

    def close(self) -> None:
        if self._stream is not None and self._drawn:
            with self._lock:
                self._stream.write(_ERASE)
                self._stream.flush()


def _width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        return 80
    return max(20, columns) if columns else 80  # 0: a terminal that never said


@contextmanager
def status(what: str, tick: bool = False) -> Iterator[Status]:
    """A :class:`Status` for the ``with`` block, erased at its end; ``tick``: a
    thread redraws it every second (work that reports no steps)."""
    line = Status(what, _stream)
    stop = threading.Event()
    ticker = None
    if tick and _stream is not None:
        def redraw() -> None:
            if not stop.wait(line._delay):
                line._draw(force=True)
                while not stop.wait(1.0):
                    line._draw(force=True)
        ticker = threading.Thread(target=redraw, name="gitwal-progress", daemon=True)
        ticker.start()
    try:
        yield line
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        line.close()


# git's progress lines end in "\r" (redrawn) or "\n" (final); a line such as
# "Writing objects:  45% (9/20)" is the detail to show.
_GIT_PROGRESS = re.compile(r"^(?:remote: )?[A-Z][a-z]+(?: [a-z]+)*: +\d+%")


def run_git(cwd: Path, args: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` with its output captured; when progress is on, git is asked
    for its progress (``--progress`` after the subcommand) and each of its
    progress lines becomes the status detail. The returned stderr holds git's
    other lines (its messages and errors), as without progress."""
    if _stream is None:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    argv = ["git", args[0], "--progress", *args[1:]]
    with status(what) as line:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pout, perr = proc.stdout, proc.stderr
        assert pout is not None and perr is not None
        out: list[bytes] = []

        def drain(pipe: IO[bytes] = pout) -> None:
            out.append(pipe.read())

        # stdout is drained beside stderr, so neither pipe can fill and stall git.
        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        kept: list[str] = []
        pending = b""
        while chunk := os.read(perr.fileno(), 4096):
            *lines, pending = re.split(rb"[\r\n]", pending + chunk)
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip()
                if _GIT_PROGRESS.match(text):
                    line.update(text.removeprefix("remote: "))
                elif text:
                    kept.append(text)
        if pending.strip():
            kept.append(pending.decode("utf-8", "replace").rstrip())
        code = proc.wait()
        reader.join()
        perr.close()
        pout.close()
    return subprocess.CompletedProcess(argv, code, b"".join(out).decode("utf-8", "replace"),
                                       "".join(t + "\n" for t in kept))
