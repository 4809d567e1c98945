"""Named crash points: where the crash tests kill gitwal on purpose.

``GITWAL_CRASH_AT=<name>`` or ``<name>:<n>`` makes the process SIGKILL itself
the n-th time (default: first) it reaches the named point. The list of names
lives in :data:`CRASH_POINTS` and docs/crash-safety.md; every durable write
(durable.py, durable_at.py) and every step of the protocols calls in here.
"""

from __future__ import annotations

import os
import signal
from typing import NoReturn

CRASH_POINTS = (
    "mid-append",  # record objects written, ref not yet moved
    "after-append",  # ref moved, its directory not yet fsynced
    "after-intent",  # intent durable, target untouched
    "mid-write",  # target half-written in place (a torn file)
    "between-paths",  # multi-path step: first path done, next not yet
    "after-apply",  # target written, not yet verified
    "after-verify",  # verified, commit record not yet appended
    "after-snapshot",  # exec: pre-tree snapshot taken, intent not yet appended
    "after-exec",  # exec: command finished, post snapshot not yet taken
    "mid-restore",  # a restore wrote the first path back, not the rest
    "checkpoint-after-commit",  # checkpoint commit made, its record not yet appended
    "compact-after-rewrite",  # compaction: new chain written, nothing archived or moved
    "compact-after-archive",  # compaction: old head archived, live ref not yet moved
    "before-close",  # agent hook: the tool ran, its closing hook has read nothing yet
)

_ENV = "GITWAL_CRASH_AT"
_spec = os.environ.get(_ENV, "")
_name, _, _nth = _spec.partition(":")
_target = int(_nth) if _nth.isdigit() else 1
_seen = 0


def crash_due(name: str) -> bool:
    """Count one arrival at the point; True on the arrival that must crash."""
    global _seen
    if name != _name:  # the common case: one string compare, nothing else
        return False
    _seen += 1
    return _seen == _target


def die() -> NoReturn:
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached: SIGKILL cannot be caught


def crash_point(name: str) -> None:
    """SIGKILL this process if ``GITWAL_CRASH_AT`` names this point (and count);
    pause it there if ``GITWAL_PAUSE_AT`` does."""
    if crash_due(name):
        die()
    if name == _pause_name:
        pause(_pause_fifo)


# Tests only: ``GITWAL_PAUSE_AT=<name>:<fifo>`` makes the process stop at the
# named point (each arrival) until the test lets it go. The process opens the
# fifo for reading, which blocks until the test opens it for writing (so the
# test knows the process is there), then reads to end of file (the test
# closes its end to release it). Events are ordered by the fifo, never by time.
_pause_name, _, _pause_fifo = os.environ.get("GITWAL_PAUSE_AT", "").partition(":")


def pause(fifo: str) -> None:
    with open(fifo, "rb") as f:
        while f.read(4096):
            pass
