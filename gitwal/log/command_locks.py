"""The lock of an exec step's command: held while the command, or anything
it started, lives; its file's existence says the command may have started.

Recovery must not decide an exec step while its lock is held, from whichever
worktree it runs, and reads "no lock file" as "the command never started"
(docs/recovery.md "Decisions for exec"). The file lives in the common git
dir's lock directory (locks.py).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2

from ..base.durable import fsync_dir
from ..base.ids import Lsn, RunId
from .locks import lock_dir


class CommandLocks:
    """Mixed into :class:`gitwal.log.store.Store`, which provides these."""

    repo: pygit2.Repository
    run: RunId

    def _command_lock(self, lsn: Lsn) -> Path:
        return lock_dir(self.repo) / f"{self.run}.{lsn}.cmd"

    @contextmanager
    def command_lock(self, lsn: Lsn) -> Iterator[int]:
        """An exclusive lock for an exec step's command; yields its fd.

        The command inherits the fd, and a flock belongs to the open file, not
        the process: the lock stays held while the command, or anything it
        started, lives, even after the gitwal process that ran it was killed.
        Recovery must not decide the step while it is held
        (:meth:`command_running`), from whichever worktree it runs. The lock
        is not durable (after a power loss no command runs); the file's
        existence is, before the command starts (:meth:`command_started`).
        """
        path = self._command_lock(lsn)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Durable before the command starts: recovery reads "no lock file"
            # as "the command never started" (command_started).
            fsync_dir(path.parent)
            yield fd
        finally:
            os.close(fd)

    def command_started(self, lsn: Lsn) -> bool:
        """Whether exec step ``lsn``'s command may have started: its lock file
        exists (made durable before the command runs, removed once the step
        is closed)."""
        return self._command_lock(lsn).exists()

    def command_running(self, lsn: Lsn) -> Path | None:
        """The lock file of exec step ``lsn`` if a process still holds it."""
        return command_running(self.repo, self.run, lsn)

    def clear_command_lock(self, lsn: Lsn) -> None:
        self._command_lock(lsn).unlink(missing_ok=True)


def command_running(repo: pygit2.Repository, run: str, lsn: int) -> Path | None:
    """The lock file of ``run``'s exec step ``lsn`` if a process still holds it
    (any run's: a restore asks whether another run's shell step is live)."""
    path = lock_dir(repo) / f"{run}.{lsn}.cmd"
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return path
    finally:
        os.close(fd)
    return None
