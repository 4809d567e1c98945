"""The background pusher of one clone and one remote
(``python -m gitwal.remote.pusher COMMON-DIR REMOTE``, started detached by
replicate.py when an append finds none listening): it pushes the newest head
of every run behind on the remote, one `git push` for them all, so a remote
slower than the steps gets many appends in one push. After each push it
fetches the remote's claim refs (claim_push.py), so this clone's steps meet
other clones' claims.

At most one runs per clone and remote: it holds ``pusher.lock`` (flock) in
``<common-dir>/wal/replica/<remote>/`` while it lives (taken by the process
that starts it, before it starts), and reads the FIFO ``wake`` there, to
which every append writes a byte. It retries a push the
transport failed (backing off, for at most :data:`RETRY_FOR` seconds without
progress), and exits after ``wal.remote.linger`` idle seconds.

No lost wake-up: an append moves its ref, then opens the FIFO, and when no
one reads it, starts a pusher unless the lock is held. The pusher opens the
FIFO before its first look at the runs; before it exits it closes the FIFO,
releases its lock, then looks at every run again. An append that found the
lock held is seen by that first or last look; one that took the lock starts
a new pusher.
"""

from __future__ import annotations

import fcntl
import os
import select
import stat
import sys
import time
import traceback
from pathlib import Path

import pygit2

from ..base.errors import WalError
from ..base.ids import valid_run_id
from ..base.seconds import seconds
from .claim_push import refresh
from .push_heads import PUSH_LIMIT, push_runs
from .replica_state import LIVE, load, push_lock, remote_of, replica_dir

LINGER = 30.0  # wal.remote.linger: idle seconds before the pusher exits
RETRY_FIRST = 0.25  # seconds before the first retry of a push the transport failed
RETRY_MAX = 5.0
RETRY_FOR = 600.0  # seconds of failed retries before it exits (the next append restarts it)


def pending(repo: pygit2.Repository, remote: str, retrying: bool) -> list[str]:
    """Runs whose newest head ``remote`` lacks (as far as this clone knows);
    those refused at this very head wait for their next append, and so do
    those the transport failed unless ``retrying``."""
    common = Path(repo.path)
    out = []
    for name in repo.references:
        run = name[len(LIVE):] if name.startswith(LIVE) else ""
        if not valid_run_id(run) or remote_of(repo, run) != remote:
            continue
        head = str(repo.references[name].target)
        state = load(common, remote, run)
        if state.seen == head or (state.error_head == head and not (retrying and state.retry)):
            continue
        out.append(run)
    return sorted(out)


def linger(repo: pygit2.Repository) -> float:
    try:
        raw = str(repo.config["wal.remote.linger"])
    except KeyError:
        return LINGER
    try:
        return seconds(raw, "wal.remote.linger", "", zero=True)
    except WalError:
        return LINGER


def _fifo(d: Path) -> Path:
    path = d / "wake"
    try:
        os.mkfifo(path, 0o600)
    except FileExistsError:
        if not stat.S_ISFIFO(os.lstat(path).st_mode):
            # Not ours: kept aside, never removed; a FIFO takes its name.
            os.rename(path, d / f"wake.not-a-fifo.{time.time_ns()}")
            os.mkfifo(path, 0o600)
    return path


def serve(repo: pygit2.Repository, remote: str, d: Path) -> None:
    """Push while there is work; return once idle for ``wal.remote.linger``
    seconds, or after :data:`RETRY_FOR` seconds of failed retries."""
    fifo = _fifo(d)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    # Our own writer: the reader never sees end-of-file between two appends.
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    backoff, stuck_since = RETRY_FIRST, None
    try:
        while True:
            _drain(reader)
            runs = pending(repo, remote, retrying=True)
            states = {}
            if runs:
                with push_lock(Path(repo.path), remote, None):
                    states = push_runs(repo, remote, runs, time.monotonic() + PUSH_LIMIT)
                # other clones' claims, fresh for the next steps (a failure:
                # the copy stays as it was, and the next wake tries again)
                refresh(repo, remote, time.monotonic() + PUSH_LIMIT)
            retrying = any(s.error is not None and s.retry for s in states.values())
            if retrying:
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > RETRY_FOR:
                    return
                wait, backoff = backoff, min(backoff * 2, RETRY_MAX)
            else:
                wait, backoff, stuck_since = linger(repo), RETRY_FIRST, None
            ready, _, _ = select.select([reader], [], [], wait)
            if not ready and not retrying:
                return
    finally:
        os.close(reader)
        os.close(writer)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _locked(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    _held_by_us(fd)
    return True


def _held_by_us(fd: int) -> None:
    os.ftruncate(fd, 0)  # who holds it, for people and tests: never trusted
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def main(argv: list[str]) -> int:
    """``COMMON-DIR REMOTE [FD]``: FD, the pusher's lock, taken by the process
    that started this one (replicate.start_pusher); else it is taken here."""
    common, remote = Path(argv[0]), argv[1]
    d = replica_dir(common, remote)
    if len(argv) > 2:
        alive = int(argv[2])
        os.set_inheritable(alive, False)
        _held_by_us(alive)
    else:
        alive = os.open(d / "pusher.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if not _locked(alive):
            return 0  # another pusher serves this remote
    log = os.open(d / "pusher.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    os.dup2(log, 2)
    try:
        repo = pygit2.Repository(str(common))
        while True:
            serve(repo, remote, d)
            os.ftruncate(alive, 0)
            fcntl.flock(alive, fcntl.LOCK_UN)
            # After the FIFO closed: an append since our last look is seen now,
            # or found no reader and started another pusher.
            if not pending(repo, remote, retrying=False) or not _locked(alive):
                return 0
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
