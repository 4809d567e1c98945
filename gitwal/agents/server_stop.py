"""Stopping a repository's hook server (`git wal agent-server --stop`).

A server holds its lock file (:func:`lock_path`) for its whole life, its pid
inside. Stopped means that lock is free again and the pid no longer a server:
SIGTERM first (it answers the calls in hand, removes its socket, exits),
SIGKILL after a timeout. Only a lock in a directory of mode 0700 owned by the
user is trusted, and only a pid that runs `git wal agent-server` is signalled.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time

from ..base.errors import WalError
from . import client

STOP_WAIT = 10.0  # seconds a stopped server may take to finish its calls


def lock_path(gitdir: str) -> str:
    """The server's lock: held for its whole life, its pid inside."""
    return client.socket_path(gitdir)[:-5] + ".lock"


class ServerDirRefused(WalError):
    """The runtime directory is not safely this user's: its lock files are not trusted."""


class ServerNotStopped(WalError):
    """A hook server outlived SIGKILL (an uninterruptible process)."""


def _pid_in(fd: int) -> int:
    """The pid a running server wrote in its lock (it writes it just after locking)."""
    for _ in range(50):
        text = os.pread(fd, 32, 0).strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
        time.sleep(0.01)
    return 0


def _is_server(pid: int, without_proc: bool) -> bool:
    """Whether ``pid`` runs `git wal agent-server`. An exited, unreaped process
    has an empty command line, a reused pid another one; where there is no
    /proc, ``without_proc`` is the answer."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"agent-server" in f.read()
    except FileNotFoundError:
        return without_proc and not os.path.isdir("/proc/self")
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # already gone: its lock is about to be free


def stop_lock(path: str, timeout: float = STOP_WAIT) -> int | None:
    """Stop the server holding the lock at ``path``: its pid, or None if none ran.

    SIGTERM first (it answers the calls in hand, removes its socket, exits),
    SIGKILL after ``timeout`` seconds. Stopped = the lock is free again.
    """
    problem = client.check_private_dir(os.path.dirname(path), create=False)
    if problem is not None:
        if not os.path.exists(os.path.dirname(path)):
            return None  # no runtime dir: no server ever ran here
        raise ServerDirRefused(f"not stopping a hook server: {problem}",
                               "only a directory of mode 0700 owned by you is trusted")
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None  # nobody holds it: no server
        except BlockingIOError:
            pass
        pid = _pid_in(fd)
        if pid <= 0 or not _is_server(pid, without_proc=True):
            return None
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        killed = False
        while True:
            # The server frees its lock in its last `finally`, a moment before
            # the interpreter exits: stopped = the lock is free and the pid gone.
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not _is_server(pid, without_proc=False):
                    return pid
            except BlockingIOError:
                pass
            now = time.monotonic()
            if now > deadline and not killed:
                _signal(pid, signal.SIGKILL)  # a server that does not stop in time
                killed, deadline = True, now + 5.0
            elif now > deadline:
                raise ServerNotStopped(f"hook server {pid} did not exit after SIGKILL",
                                       f"see `ps -p {pid}`")
            time.sleep(0.02)
    finally:
        os.close(fd)


def stop(gitdir: str, timeout: float = STOP_WAIT) -> int | None:
    """Stop the hook server of the repository at ``gitdir`` (its pid, or None)."""
    return stop_lock(lock_path(gitdir), timeout)


def stop_all(timeout: float = STOP_WAIT) -> list[int]:
    """Stop every hook server of this user's runtime dir (their pids)."""
    rdir = client.runtime_dir()
    if not os.path.isdir(rdir):
        return []
    names = sorted(n for n in os.listdir(rdir) if n.endswith(".lock"))
    return [pid for n in names if (pid := stop_lock(os.path.join(rdir, n), timeout))]


__all__ = ["STOP_WAIT", "ServerDirRefused", "ServerNotStopped", "lock_path", "stop",
           "stop_all", "stop_lock"]
