"""Path locks: one step at a time writes a path, whichever run it belongs to.

A run lock (locks.py) serialises the writers of one run; two runs sharing a
working tree could still both read one pre-image and both write it (a lost
update). So a step holds, besides its run lock, one advisory lock per target
path from reading its pre-image to appending its commit or abort:
``<common git dir>/wal/paths/<sha1>.lock``, the sha1 of the worktree's name
and the path (two worktrees are two trees: their paths never collide).

Invariants:

* a lock is only ever *tried* (never waited for): a step that finds a path
  held is refused before its intent is appended, so it has written nothing;
* a multi-path step tries its paths in sorted order, so of two steps
  sharing a path the first to reach it wins and no cycle can form;
* the holder writes one JSON line (run, LSN, tool, task, pid, since) into
  the lock file for the refusal message; nothing trusts it for anything else.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..base.durable import makedirs_durable
from ..base.errors import RunBusy
from ..base.repository import common_dir, worktree_name


class PathBusy(RunBusy):
    """Another run's step is changing a path this step would change."""


@dataclass(frozen=True)
class Holder:
    """Who holds a path (what a refusal names)."""

    run: str
    lsn: int
    tool: str
    task: str

    def line(self) -> bytes:
        return json.dumps({"run": self.run, "lsn": self.lsn, "tool": self.tool,
                           "task": self.task, "pid": os.getpid(),
                           "since": round(time.time(), 3)}, sort_keys=True).encode() + b"\n"


def path_lock_file(repo: pygit2.Repository, path: str) -> Path:
    key = hashlib.sha1(f"{worktree_name(repo)}\0{path}".encode()).hexdigest()
    return common_dir(repo) / "wal" / "paths" / f"{key}.lock"


def read_holder(lock: Path) -> Holder | None:
    """The holder a lock file names (None when unreadable, e.g. not yet written)."""
    try:
        info = json.loads(lock.read_bytes().decode())
        return Holder(str(info["run"]), int(info["lsn"]), str(info["tool"]),
                      str(info["task"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def busy_message(path: str, run: str, lsn: int | None, tool: str, task: str,
                 what: str = "is being changed") -> str:
    """The refusal's words, shared by path locks and open agent intents."""
    shown = path if path.isprintable() else repr(path)
    step = f"LSN {lsn} {tool}" if lsn is not None else "a step"
    task_text = task[:80] if task.isprintable() else repr(task[:80])
    about = f" (task {task_text!r})" if task else ""
    return f"{shown} {what} by run {run}{about}, {step}, right now"


BUSY_HINT = ("read the file again and retry once that step is over, wait for the other run, "
             "or coordinate with it (`git wal runs` lists the runs; `git wal claim` reserves "
             "paths)")


@contextmanager
def path_locks(repo: pygit2.Repository, paths: Sequence[str], holder: Holder) -> Iterator[None]:
    """Hold the lock of every path in ``paths``, or raise :class:`PathBusy`
    naming the holder of the first one held elsewhere (holding none then)."""
    d = common_dir(repo) / "wal" / "paths"
    if not d.is_dir():
        makedirs_durable(d)
    held: list[int] = []
    try:
        for path in sorted(set(paths)):
            lock = path_lock_file(repo, path)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                other = read_holder(lock)
                if other is None:
                    raise PathBusy(f"{path} is being changed by another run's step right now",
                                   BUSY_HINT) from None
                raise PathBusy(busy_message(path, other.run, other.lsn, other.tool,
                                            other.task), BUSY_HINT) from None
            held.append(fd)
            # Not durable on purpose: it only tells a refused step who holds the path.
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.line(), 0)
        yield
    finally:
        for fd in reversed(held):
            os.ftruncate(fd, 0)  # still held: nobody reads a stale holder
            os.close(fd)


__all__ = ["BUSY_HINT", "Holder", "PathBusy", "busy_message", "path_lock_file", "path_locks",
           "read_holder"]
