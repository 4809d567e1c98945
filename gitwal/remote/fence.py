"""The fence: a clone stops writing a run once it has seen, for itself, that
the run goes on elsewhere (docs/remote-runs.md, "Taking a run over").

What fences a clone is a fact it observes, never a record it reads: its push
of the run was refused because the remote's ``refs/wal/<run>`` moved to a
head that the local log does not extend and that does not extend the local
log (the two forked). From then on every step of the run here fails
(:class:`~gitwal.base.errors.TakenOver`, exit 6) and the run is not pushed.
Who took it over is read from the fetched records (a ``takeover`` record
between the fork and the remote's head) and only shown.

``<common-dir>/wal/replica/<remote>/fenced/<run>.json`` holds the fence,
written once, durably, apart from the pusher's state (which a lost file
only resets): a fence is lifted only by `git wal resume` here. The local log
is left as it is; resume keeps it in ``refs/wal-fenced/<run>/<n>``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pygit2

from ..base.display import safe
from ..base.durable import atomic_write, makedirs_durable, unlink_durable
from ..base.errors import TakenOver, WalError
from ..base.ids import CommitId, RunId
from ..base.repository import common_dir
from ..log.chain import Chain
from ..records.model import Takeover
from .replica_state import remote_of, replica_dir

_WALK = 10_000  # appends read back from the remote's head looking for the takeover


@dataclass(frozen=True)
class Fence:
    """A run this clone may no longer write: the remote's head that forked
    from the local log, the local head then, when, and who (as read: data)."""

    run: str
    remote: str
    theirs: str
    ours: str
    at: float
    by: str  # "" when no takeover record was found between the fork and their head

    def error(self) -> TakenOver:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.at))
        who = f" by {self.by}" if self.by else ""
        return TakenOver(
            f"run {self.run} was taken over{who}: {self.remote}'s refs/wal/{self.run} "
            f"is at {self.theirs[:12]}, which forks from this clone's log "
            f"({self.ours[:12]}); seen at {when}. This clone no longer writes the run, "
            "and nothing of it is pushed",
            f"nothing is lost: this clone's appends stay in its log; go on where the run "
            f"is now, or take it back here with `git wal resume {self.run} --remote "
            f"{self.remote}` (this clone's own appends are then kept in "
            f"refs/wal-fenced/{self.run}/)",
        )


def _path(common: Path, remote: str, run: str, create: bool = False) -> Path:
    d = replica_dir(common, remote, create) / "fenced"
    if create and not d.is_dir():
        makedirs_durable(d)
    return d / f"{run}.json"


def fence_of(repo: pygit2.Repository, run: str) -> Fence | None:
    """The fence of ``run`` on its remote, or None (also for a run with no remote)."""
    remote = remote_of(repo, run)
    if remote is None:
        return None
    return load(common_dir(repo), remote, run)


def load(common: Path, remote: str, run: str) -> Fence | None:
    try:
        raw = json.loads(_path(common, remote, run).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raw = {}  # damaged: still fenced (the file exists), the details lost
    if not isinstance(raw, dict):
        raw = {}

    def text(key: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else ""
    at = raw.get("at")
    return Fence(run, remote, text("theirs") or "?" * 12, text("ours") or "?" * 12,
                 float(at) if isinstance(at, (int, float)) else time.time(), text("by"))


def refuse_if_fenced(repo: pygit2.Repository, run: str) -> None:
    """Raise :class:`TakenOver` when this clone is fenced off ``run``."""
    fence = fence_of(repo, run)
    if fence is not None:
        raise fence.error()


def record(repo: pygit2.Repository, remote: str, run: str, theirs: str, ours: str) -> Fence:
    """Fence ``run`` (the caller saw the remote fork at ``theirs``), durably."""
    fence = Fence(run, remote, theirs, ours, round(time.time(), 3),
                  taker(repo, remote, run, theirs, ours))
    data = json.dumps(asdict(fence), sort_keys=True).encode() + b"\n"
    atomic_write(_path(common_dir(repo), remote, run, create=True), data, tag="f")
    return fence


def lift(repo: pygit2.Repository, remote: str, run: str) -> None:
    """Remove the fence (`git wal resume` took the run back here)."""
    path = _path(common_dir(repo), remote, run)
    if path.exists():
        unlink_durable(path)


def taker(repo: pygit2.Repository, remote: str, run: str, theirs: str, ours: str) -> str:
    """Who took ``run`` over, from the newest ``takeover`` record between the
    fork and ``theirs`` ("" when the objects are not here or there is none).
    Read as data: a name to show, nothing else."""
    chain = Chain(repo, RunId(run))
    try:
        stop = repo.merge_base(pygit2.Oid(hex=theirs), pygit2.Oid(hex=ours))
    except (KeyError, ValueError, pygit2.GitError):
        stop = None
    at: CommitId | None = CommitId(theirs)
    for _ in range(_WALK):
        if at is None or (stop is not None and at == str(stop)):
            break
        try:
            found = [r for r in chain.head_records(at) if isinstance(r, Takeover)]
            if found:
                t = found[-1]
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t.at))
                return safe(f"clone {t.clone} on {t.host} at {when} (run's remote "
                            f"{t.remote!r} there)")
            parent = chain.parent(at)
        except (WalError, LookupError, ValueError, pygit2.GitError):
            return ""  # a fetched chain is data: anything odd in it shows no name
        at = parent
    return ""


__all__ = ["Fence", "fence_of", "lift", "load", "record", "refuse_if_fenced",
           "taker"]
