"""Every append of a run pushed to its remote as it is written
(docs/remote-runs.md): the :class:`Replication` the facade hands each store,
and the wake-up of the background pusher (pusher.py); the push itself is
push_heads.py's.
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pygit2

from ..base.errors import NotOnRemote, WalError
from ..base.ids import CommitId, RunId
from ..base.repository import common_dir
from ..base.seconds import seconds
from .push_heads import git_env, push_runs
from .refs import ancestor_or_same
from .replica_state import (
    durability,
    load,
    push_lock,
    remote_of,
    replica_dir,
)

DEFAULT_TIMEOUT = 10.0  # wal.remote.timeout: how long a commit-durable step waits
_started: list[subprocess.Popen[bytes]] = []  # pushers this process started, reaped later
_reaping = threading.Lock()


def remote_timeout(repo: pygit2.Repository) -> float:
    try:
        raw = str(repo.config["wal.remote.timeout"])
    except KeyError:
        return DEFAULT_TIMEOUT
    return seconds(raw, "wal.remote.timeout",
                   "fix it with `git config wal.remote.timeout SECONDS`")


class Replication:
    """A clone's replication, handed to every store the facade opens."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.common = common_dir(repo)
        self._remotes: dict[str, str | None] = {}

    def check(self) -> None:
        """A bad ``wal.remote.*`` setting fails before a step logs anything."""
        durability(self.repo)
        remote_timeout(self.repo)
        try:
            name = str(self.repo.config["wal.remote"]).strip()
        except (KeyError, ValueError):
            return
        if name and name not in self.repo.remotes.names():
            raise WalError(f"wal.remote is {name!r}, which is no remote of this clone",
                           "name a configured remote (`git remote -v`): `git config "
                           "wal.remote NAME`, or `git config --unset wal.remote`")

    def remote(self, run: str) -> str | None:
        if run not in self._remotes:
            self._remotes[run] = remote_of(self.repo, run)
        return self._remotes[run]

    def appended(self, run: RunId, head: CommitId) -> None:
        try:
            name = self.remote(run)
            if name is not None:
                wake(self.common, name)
        except Exception:  # never raise: the append is durable already
            pass  # the next append (or `git wal push`) sends it

    def hold(self, run: RunId, head: CommitId, what: str) -> None:
        name = self.remote(run)
        if name is None or durability(self.repo) != "commit":
            return
        limit = remote_timeout(self.repo)
        deadline = time.monotonic() + limit
        state = load(self.common, name, run)
        if state.seen is not None and ancestor_or_same(self.repo, head, state.seen):
            return  # the pusher was quicker
        with push_lock(self.common, name, deadline) as held:
            if held:
                state = push_runs(self.repo, name, [run], deadline).get(run, state)
                if state.seen is not None and ancestor_or_same(self.repo, head, state.seen):
                    return
        if not held:  # the pusher's push may have carried it all the same
            state = load(self.common, name, run)
            if state.seen is not None and ancestor_or_same(self.repo, head, state.seen):
                return
        reason = (state.error or "the push did not land") if held else \
            f"another push to it did not finish within {limit:g} s"
        raise NotOnRemote(
            f"{what} of run {run} is committed here but not on the remote {name}: {reason}",
            f"nothing is lost: the step is in the local log (`git wal log --run {run}`); the "
            f"next step (or `git wal push {name} --run {run}`) sends it once {name} answers; "
            "`git wal status` shows how many appends it lacks")


def wake(common: Path, remote: str) -> None:
    """Tell the remote's pusher there is work; start one unless a FIFO took
    the byte (none listens, or ``wake`` is not a FIFO: the pusher puts that
    file aside and makes its FIFO)."""
    fifo = replica_dir(common, remote, create=False) / "wake"
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        start_pusher(common, remote)  # ENXIO: no reader, no pusher; else not a FIFO
        return
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            start_pusher(common, remote)
            return
        os.write(fd, b"\n")
    except BlockingIOError:
        pass  # full: the pusher has wake-ups enough
    finally:
        os.close(fd)


def start_pusher(common: Path, remote: str) -> None:
    """A detached pusher (its own session, no terminal, every other fd closed),
    unless one is alive (starting, serving, or about to look once more before
    it exits: each sees this append). The pusher's lock is taken here and
    handed to it, so no second one starts while it imports."""
    with _reaping:  # the hook server appends from several threads
        _started[:] = [proc for proc in _started if proc.poll() is None]
    d = replica_dir(common, remote)
    fd = os.open(d / "pusher.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        proc = subprocess.Popen(
            [sys.executable, "-m", "gitwal.remote.pusher", str(common), remote, str(fd)],
            cwd=common, env=git_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
            pass_fds=(fd,))
        with _reaping:
            _started.append(proc)
    finally:
        os.close(fd)  # the pusher holds the lock now (or nobody, if it did not start)
