"""Taking a run over from its remote (`git wal resume`, docs/remote-runs.md,
"Taking a run over"): fetch the run, integrate it, then append the
``takeover`` record and push it by compare-and-swap from the head fetched.

The push is the takeover: it lands only if the remote's ``refs/wal/<run>``
is still at the head this clone read (``--force-with-lease`` with that head,
and that head is the new append's parent, so it is a fast-forward). A clone
that appended meanwhile wins; this clone's append is then taken back (it
wrote it, nobody saw it) and nothing else changed. The clone that lost the
run is fenced by its own next push (fence.py).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..base.errors import WalError
from ..base.ids import CommitId, Lsn, RunId
from ..base.repository import common_dir, worktree_name
from ..log.authorship import clone_id
from ..log.store import Store
from ..records.model import Record, Takeover
from .cas_push import LANDED, Update, porcelain, push_args
from .checks import chain_defect
from .fence import load as load_fence
from .fetch import fetch
from .push_heads import git_cwd, git_until
from .refs import LIVE_PREFIX, RefOutcome, staging_prefix
from .replica_state import RunState, choose_remote, push_lock, save

FENCED_PREFIX = "refs/wal-fenced/"  # refs/wal-fenced/<run>/<n>: a fenced clone's own appends
# The outcomes of integrating the remote's log that resume can go on from.
_GOOD = ("created", "updated", "up-to-date", "compacted", "ahead")


class TakeoverLost(WalError):
    """The remote's log moved between the fetch and the takeover's push."""


@dataclass(frozen=True)
class Fetched:
    """The run as the remote has it, integrated into the local log."""

    remote: str
    theirs: CommitId  # the remote's head of the run
    outcome: RefOutcome  # how the local log took it (fetch.py)
    fork: CommitId | None = None  # this clone's fenced head, kept in FENCED_PREFIX (taken back)


def fetch_run(repo: pygit2.Repository, root: Path, remote: str | None, run: str) -> Fetched:
    """Fetch ``run`` from ``remote`` and integrate it (create or fast-forward);
    a local log that forks from the remote's is an error naming both heads."""
    transfer = fetch(root, remote, run=run)
    live = next((o for o in transfer.refs if o.ref == LIVE_PREFIX + run), None)
    staged = repo.references.get(f"{staging_prefix(transfer.remote)}wal/{run}")
    if live is None or staged is None:
        raise WalError(f"remote {transfer.remote} has no live log of run {run}",
                       f"`git ls-remote {transfer.remote} 'refs/wal/*'` lists the runs it has")
    if live.status == "diverged" and load_fence(common_dir(repo), transfer.remote,
                                                run) is not None:
        theirs = CommitId(str(staged.target))
        return Fetched(transfer.remote, theirs, live, _keep_fork(repo, run, staged.name,
                                                               theirs))
    if live.status not in _GOOD:
        raise WalError(
            f"run {run}: the remote's log could not be taken in ({live.status}: {live.detail})",
            f"nothing was taken over; `git wal fetch {transfer.remote} --run {run}` shows the "
            "same; a local log that forks from the remote's is this clone's own work: "
            "keep it, or resume the run in a fresh clone")
    return Fetched(transfer.remote, CommitId(str(staged.target)), live)


def _keep_fork(repo: pygit2.Repository, run: str, staged: str, theirs: CommitId) -> CommitId:
    """A fenced clone takes its run back: its own log (forked from the
    remote's after the takeover) is kept in ``refs/wal-fenced/<run>/<n>``
    (never pushed: no refspec of gitwal's names it), then the live ref moves
    to the remote's head by compare-and-swap. Nothing is lost."""
    store = Store(repo, RunId(run))
    if (bad := chain_defect(repo, run, staged, theirs)) is not None:
        raise WalError(f"run {run}: the remote's log is not a valid log: {bad}",
                       "nothing was taken over; `git wal verify --run` on the remote's copy")
    with store.locked(wait=False):
        ours = store.head()
        assert ours is not None
        prefix = f"{FENCED_PREFIX}{run}/"
        taken = [int(n[len(prefix):]) for n in repo.references
                 if n.startswith(prefix) and n[len(prefix):].isdigit()]
        store.create_ref(f"{prefix}{max(taken, default=0) + 1}", ours)
        store.move_head(ours, theirs)
    return ours


def takeover_record(repo: pygit2.Repository, run: str, lsn: Lsn, root: Path, remote: str,
                    theirs: str) -> Takeover:
    return Takeover(RunId(run), lsn, clone_id(repo), socket.gethostname(),
                    (worktree_name(repo), str(root)), remote, theirs, int(time.time()))


def taken_here(repo: pygit2.Repository, records: list[Record]) -> Takeover | None:
    """The newest record when it is this clone's takeover (a resume ran here
    before: its push may or may not have landed)."""
    last = records[-1] if records else None
    return last if isinstance(last, Takeover) and last.clone == clone_id(repo) else None


def push_takeover(store: Store, remote: str, new: CommitId, theirs: CommitId,
                  timeout: float) -> None:
    """Move the remote's ``refs/wal/<run>`` from ``theirs`` to ``new`` (a child
    of it), never forced. :class:`TakeoverLost` when the remote moved; a
    failure to reach the remote is a WalError. Either way the local log is
    put back at ``theirs`` (this append was never seen: taken back whole)."""
    repo, run = store.repo, store.run
    common = common_dir(repo)
    deadline = time.monotonic() + timeout
    ref = LIVE_PREFIX + run
    with push_lock(common, remote, deadline) as held:
        if not held:
            _take_back(store, new, theirs)
            raise WalError(f"another push to {remote} held the push lock for {timeout:g} s",
                           "nothing was taken over; try again")
        code, stdout, stderr = git_until(
            ["git", f"--git-dir={common}", *push_args(remote, [Update(ref, new, theirs)])],
            git_cwd(repo), deadline)
        outcome = porcelain(stdout).get(ref)
        if outcome is not None and outcome.status in LANDED:
            save(common, remote, run, RunState(seen=new))
            choose_remote(repo, run, remote)
            return
    _take_back(store, new, theirs)
    if outcome is not None:
        raise TakeoverLost(
            f"run {run}: {remote}'s refs/wal/{run} moved after it was fetched (another "
            f"clone appended to the run or took it over): {outcome.detail or stderr}",
            "nothing was taken over; run `git wal resume` again to see where the run is now")
    why = stderr if code is not None else "the push did not finish in time"
    raise WalError(f"the takeover of run {run} could not be pushed to {remote}: {why}",
                   "nothing was taken over; check the remote (`git remote -v`) and try again")


def _take_back(store: Store, new: CommitId, theirs: CommitId) -> None:
    """The local log back at ``theirs`` by compare-and-swap from ``new``: the
    takeover append this process wrote and no one else has seen."""
    store.move_head(new, theirs)
