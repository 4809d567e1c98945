"""What replication keeps per run, durably, in gitwal's private directory of
the clone (docs/remote-runs.md, "Files"): which remote a run replicates to,
the remote head this clone last saw there, the last push error; and the
``remote`` part of `git wal status` made from them.

``<common-dir>/wal/remotes/<run>``: the remote ``git wal begin --remote``
chose for that run (else ``git config wal.remote``).
``<common-dir>/wal/replica/<remote>/``: the pusher's locks and wake-up FIFO,
and ``runs/<run>.json``, the run's state there.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pygit2

from ..base.durable import atomic_write, makedirs_durable
from ..base.errors import WalError
from ..base.repository import common_dir, worktree_name

LIVE = "refs/wal/"


@dataclass(frozen=True)
class RunState:
    """One run on one remote: ``seen`` the head this clone last saw there
    (None: never), the last push error, when, and at which local head."""

    seen: str | None = None
    error: str | None = None
    error_at: float | None = None
    error_head: str | None = None
    retry: bool = False  # the error was the transport's: the pusher tries again


@dataclass(frozen=True)
class RemoteState:
    """The ``remote`` of `git wal status --json`."""

    name: str
    behind: int  # appends of the live log not on the remote yet (as this clone knows)
    error: str | None
    error_at: float | None

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "behind": self.behind, "error": self.error,
                "error_at": self.error_at}


def private(repo: pygit2.Repository) -> Path:
    return common_dir(repo) / "wal"


def replica_dir(common: Path, remote: str, create: bool = True) -> Path:
    """``<common-dir>/wal/replica/<remote, %-quoted>``, created durably."""
    d = common / "wal" / "replica" / urllib.parse.quote(remote, safe="")
    if create and not (d / "runs").is_dir():
        makedirs_durable(d / "runs")
    return d


def _state_path(common: Path, remote: str, run: str, create: bool = True) -> Path:
    return replica_dir(common, remote, create) / "runs" / f"{run}.json"


def _oid(value: object) -> str | None:
    return value if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40}", value) else None


def load(common: Path, remote: str, run: str) -> RunState:
    """What was kept for ``run``; a missing or damaged file (or field) means
    "never seen": the lease then protects the remote."""
    try:
        raw = json.loads(_state_path(common, remote, run, False).read_bytes())
    except (OSError, ValueError):
        return RunState()
    if not isinstance(raw, dict):
        return RunState()
    error, at = raw.get("error"), raw.get("error_at")
    return RunState(_oid(raw.get("seen")), error if isinstance(error, str) else None,
                    float(at) if isinstance(at, (int, float)) else None,
                    _oid(raw.get("error_head")), raw.get("retry") is True)


def save(common: Path, remote: str, run: str, state: RunState) -> None:
    """Durably (the caller holds the remote's push lock)."""
    data = json.dumps(asdict(state), sort_keys=True).encode() + b"\n"
    atomic_write(_state_path(common, remote, run), data, tag="r")


def failed(state: RunState, error: str, head: str, retry: bool) -> RunState:
    return RunState(state.seen, error, round(time.time(), 3), head, retry)


@contextmanager
def push_lock(common: Path, remote: str, deadline: float | None) -> Iterator[bool]:
    """Hold the lock every push of this clone to ``remote`` takes (the pusher's,
    a commit-durable step's); yields False when ``deadline`` passed first."""
    fd = os.open(replica_dir(common, remote) / "push.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        pause = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                assert deadline is not None
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        yield True
    finally:
        os.close(fd)


# -- which remote a run goes to ----------------------------------------------------


def run_remote_path(repo: pygit2.Repository, run: str) -> Path:
    return private(repo) / "remotes" / run


def remote_of(repo: pygit2.Repository, run: str) -> str | None:
    """The remote ``run`` replicates to: its own choice, else ``wal.remote``, else None."""
    try:
        name = run_remote_path(repo, run).read_text().strip()
        if name:
            return name
    except (OSError, ValueError):  # absent, or not text: as if never chosen
        pass
    try:
        configured = str(repo.config["wal.remote"]).strip()
    except (KeyError, ValueError):
        return None
    return configured or None


def choose_remote(repo: pygit2.Repository, run: str, name: str) -> None:
    """Keep ``git wal begin --remote NAME`` for ``run``, durably, before its plan."""
    path = run_remote_path(repo, run)
    if not path.parent.is_dir():
        makedirs_durable(path.parent)
    atomic_write(path, (name + "\n").encode(), tag="m")


def durability(repo: pygit2.Repository) -> str:
    try:
        value = str(repo.config["wal.remote.durability"]).strip().lower()
    except KeyError:
        return "async"
    if value not in ("async", "commit"):
        raise WalError(f"wal.remote.durability is {value!r}, not async or commit",
                       "fix it: `git config wal.remote.durability async` (or commit)")
    return value


def _binding(repo: pygit2.Repository, run: str) -> Path:
    return common_dir(repo) / "wal" / "taken" / run


def bind_here(repo: pygit2.Repository, run: str) -> None:
    """Bind ``run`` to this worktree in this clone (after its takeover landed):
    the run's plan names the worktree it began in, elsewhere."""
    path = _binding(repo, run)
    if not path.parent.is_dir():
        makedirs_durable(path.parent)
    atomic_write(path, (worktree_name(repo) + "\n").encode(), tag="t")


def bound_here(repo: pygit2.Repository, run: str) -> str | None:
    """The worktree name this clone bound ``run`` to by a takeover, or None.
    Written by this clone only, inside its git dir: no clone carries it."""
    try:
        return _binding(repo, run).read_text().rstrip("\n")
    except (OSError, ValueError):
        return None


# -- status --------------------------------------------------------------------


def behind(repo: pygit2.Repository, head: str, seen: str | None) -> int:
    """Append commits reachable from ``head`` and not from ``seen``."""
    walker = repo.walk(pygit2.Oid(hex=head), pygit2.enums.SortMode.NONE)
    if seen is not None:
        try:
            walker.hide(pygit2.Oid(hex=seen))
        except (KeyError, ValueError, pygit2.GitError):
            pass  # a head we no longer have: every append counts
    return sum(1 for _ in walker)


def remote_state(repo: pygit2.Repository, run: str) -> RemoteState | None:
    """``run``'s replication as this clone knows it; None when it has no remote."""
    name = remote_of(repo, run)
    if name is None:
        return None
    ref = repo.references.get(LIVE + run)
    state = load(common_dir(repo), name, run)
    count = 0 if ref is None else behind(repo, str(ref.target), state.seen)
    return RemoteState(name, count, state.error, state.error_at)
