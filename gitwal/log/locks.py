"""The run lock and its waiting: who holds a run, how long to wait for it.

Locks live in the common git dir (``<common>/wal/locks/``): a run's log is
shared by every worktree, and so must be the lock that serializes its
writers (docs/crash-safety.md, "Locks"). The holder of a run lock writes
one line naming itself into the lock file (docs/format.md): a waiter shows
it to people and never trusts it for anything else.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import pygit2

from ..base.durable import makedirs_durable
from ..base.errors import EXIT_LOCK_TIMEOUT, RunBusy
from ..base.ids import RunId
from ..base.repository import common_dir
from ..base.seconds import seconds

TELL_AFTER = 1.0  # seconds a writer waits for the run lock before saying who holds it
_POLL_MAX = 0.05  # the longest pause between two tries of a busy lock


def lock_dir(repo: pygit2.Repository) -> Path:
    """Run and command locks: in the common git dir, seen from every worktree."""
    d = common_dir(repo) / "wal" / "locks"
    if not d.is_dir():
        makedirs_durable(d)
    return d


def config_wait_timeout(repo: pygit2.Repository) -> float | None:
    """``git config wal.waitTimeout`` (seconds); None (wait for ever) when unset."""
    try:
        raw = str(repo.config["wal.waitTimeout"])
    except KeyError:
        return None
    return seconds(raw, "wal.waitTimeout", "fix it with `git config wal.waitTimeout SECONDS`",
                   zero=True)


class LockTimeout(RunBusy):
    """The run lock was not free within the wait timeout."""

    exit_code = EXIT_LOCK_TIMEOUT


def _holder_line() -> bytes:
    """What a lock holder writes into its lock file: who it is, since when."""
    argv = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python",
            *sys.argv[1:]]
    return json.dumps({"pid": os.getpid(), "argv": argv, "since": round(time.time(), 3)},
                      sort_keys=True).encode() + b"\n"


def describe_holder(path: Path) -> str:
    """The holder a lock file names, for people ("pid 12 (`git-wal apply ...`) for 3.0 s")."""
    try:
        info = json.loads(path.read_bytes().decode())
        pid, argv, since = int(info["pid"]), list(info["argv"]), float(info["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another live gitwal process"
    held = max(0.0, time.time() - since)
    command = " ".join(map(str, argv))
    if not command.isprintable():
        command = repr(command)
    return f"pid {pid} (`{command}`) for {held:.1f} s"


def tell(message: str) -> None:
    print(f"gitwal: {message}", file=sys.stderr, flush=True)


@contextmanager
def run_lock(path: Path, run: str, wait: bool, limit: float | None,
             notify: Callable[[str], None]) -> Iterator[None]:
    """Hold the advisory lock at ``path`` for run ``run``, naming ourselves in it.

    ``wait`` False refuses at once when it is held; otherwise wait up to
    ``limit`` seconds (None: for ever), calling ``notify`` once after
    :data:`TELL_AFTER` seconds with who holds it.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, run, wait, limit, notify)
        # Not durable on purpose: it only tells a waiter who holds the lock.
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_line(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # still held: no waiter reads a stale holder
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, run: str, wait: bool, limit: float | None,
             notify: Callable[[str], None]) -> None:
    if _try(fd):
        return
    if not wait:
        raise RunBusy(
            f"run {run} is in use by another live gitwal process: {describe_holder(path)}",
            "wait for it to finish, or stop it, then run the command again",
        )
    start = time.monotonic()
    pause, told = 0.002, False
    while True:
        waited = time.monotonic() - start
        if limit is not None and waited >= limit:
            raise LockTimeout(
                f"run {run} is still held by {describe_holder(path)}; "
                f"gave up after {waited:.1f} s",
                "wait for that process to finish (or stop it), or pass a longer "
                "--wait-timeout (git config wal.waitTimeout)",
            )
        if not told and waited >= TELL_AFTER:
            notify(f"waiting for run {run}: held by {describe_holder(path)}")
            told = True
        # flock has no timeout: poll, backing off to _POLL_MAX.
        step = min(pause, _POLL_MAX)
        time.sleep(step if limit is None else max(0.0, min(step, limit - waited)))
        pause *= 2
        if _try(fd):
            return


def _try(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class RunLocking:
    """The run lock of a :class:`gitwal.log.store.Store`, which provides these
    (it sets :attr:`wait_timeout` and :attr:`notify`)."""

    repo: pygit2.Repository
    run: RunId
    wait_timeout: float | Literal["config"] | None
    notify: Callable[[str], None]
    holding: int  # > 0 while this object holds the run lock (set to 0 by the store)

    @contextmanager
    def locked(self, wait: bool = True, timeout: float | None = None) -> Iterator[None]:
        """Hold this run's advisory lock: one live gitwal writer per run.

        The kernel drops the lock when the holder dies (even by SIGKILL), so a
        ``refs/wal/<run>.lock`` found while we hold it is stale by definition.
        ``wait``: False refuses at once when the lock is held; otherwise wait
        up to ``timeout`` seconds (None: :attr:`wait_timeout`), saying after a
        second who holds it (:func:`run_lock`).
        """
        limit = timeout if timeout is not None else (
            config_wait_timeout(self.repo) if self.wait_timeout == "config"
            else self.wait_timeout)
        if limit is not None:  # a caller's number: NaN or 1e300 must not reach the wait
            limit = seconds(limit, "the wait timeout", "pass a number of seconds", zero=True)
        with run_lock(lock_dir(self.repo) / f"{self.run}.lock", self.run, wait, limit,
                      self.notify):
            self.holding += 1
            try:
                yield
            finally:
                self.holding -= 1
