"""One push of the newest heads of a clone's runs to their remote, never
forced (docs/remote-runs.md): what the pusher (pusher.py) and a commit-durable
step (replicate.py) run, holding the clone's push lock.

A push moves the remote's ``refs/wal/<run>`` only by a fast-forward from the
head this clone last saw there: that head must be an ancestor of what is
pushed (checked here, before every push: a matching lease would let git
force the update), and the remote must still be at it
(``--force-with-lease=refs/wal/<run>:<last seen, or empty>``, no ``+``). A
refusal is recorded as the run's error, never retried with force; a run
compacted here is left to `git wal push`, which handles compaction.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import pygit2

from ..base.repository import common_dir
from .cas_push import LANDED, Update, porcelain, push_args
from .fence import load as fence_load
from .fence import record as record_fence
from .refs import ancestor_or_same, archived, last_line, staging_prefix
from .replica_state import LIVE, RunState, failed, load, save

PUSH_LIMIT = 300.0  # the longest one background push may take before it is killed
_STRIP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX",
          "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE")

def git_env() -> dict[str, str]:
    """The environment of the git a push runs: no repository of the caller's,
    no prompt for credentials (nobody is there to answer)."""
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env



def push_runs(repo: pygit2.Repository, remote: str, runs: Iterable[str],
              deadline: float) -> dict[str, RunState]:
    """Push each run's newest head to ``remote`` (one `git push` for all), the
    caller holding the push lock; every run's new state, saved durably."""
    # Loaded only where a push is made (the pusher, a commit-durable step):
    # every command opens a Wal, and `status` must not pay for the log readers.
    from .secret_scan import refusal

    common = common_dir(repo)
    out: dict[str, RunState] = {}
    todo: dict[str, tuple[str, RunState]] = {}
    for run in runs:
        ref = repo.references.get(LIVE + run)
        if ref is None:
            continue
        head, state = str(ref.target), load(common, remote, run)
        if state.seen == head:
            out[run] = state
        elif (fence := fence_load(common, remote, run)) is not None:
            out[run] = failed(state, fence.error().message, head, retry=False)
        elif (leak := refusal(repo, [run])) is not None:  # as `git wal push` refuses it
            out[run] = failed(state, f"{leak.message} (hint: {leak.hint})", head, retry=False)
        elif state.seen is not None and not ancestor_or_same(repo, state.seen, head):
            # Compacted here, or diverged: unless the remote moved to a head
            # the local log extends (`git wal push` sent the compacted chain).
            now = _theirs(repo, remote, run, state, head, deadline, pushed=False)
            if isinstance(now, RunState):
                out[run] = now
            else:
                todo[run] = (head, _seen(state, now))
        else:
            todo[run] = (head, state)
    for _round in range(2):  # the second: the heads the remote turned out to have
        if not todo:
            break
        todo = _push(repo, remote, todo, deadline, out)
    for run, (head, state) in todo.items():
        out[run] = failed(state, f"refs/wal/{run} on {remote} kept moving", head, retry=True)
    for run, state in out.items():
        save(common, remote, run, state)
    return out


def _seen(state: RunState, theirs: str | None) -> RunState:
    return RunState(theirs, state.error, state.error_at, state.error_head, state.retry)


def _refused(repo: pygit2.Repository, remote: str, run: str, state: RunState,
             head: str, theirs: str | None = None) -> RunState:
    theirs = theirs or state.seen or ""
    if theirs and archived(repo, run, theirs):
        why = (f"run {run} was compacted here: the remote's chain ({theirs[:12]}) is "
               f"archived, not extended; `git wal push {remote} --run {run}` sends it")
    else:
        why = (f"refs/wal/{run} on {remote} is at {theirs[:12] or 'nothing'}, which the "
               f"local log ({head[:12]}) does not extend: not pushed, nothing was forced "
               f"(`git wal fetch {remote} --run {run}` shows how they diverged)")
    return failed(state, why, head, retry=False)


def _push(repo: pygit2.Repository, remote: str, todo: dict[str, tuple[str, RunState]],
          deadline: float, out: dict[str, RunState]) -> dict[str, tuple[str, RunState]]:
    """One `git push`; the runs to push again (the remote had a head we lacked)."""
    args = ["git", f"--git-dir={common_dir(repo)}",
            *push_args(remote, [Update(LIVE + run, head, state.seen or "")
                                for run, (head, state) in todo.items()])]
    code, stdout, stderr = git_until(args, git_cwd(repo), deadline)
    seen = porcelain(stdout)
    again: dict[str, tuple[str, RunState]] = {}
    for run, (head, state) in todo.items():
        outcome = seen.get(LIVE + run)
        if outcome is None:
            why = stderr if code is not None else "the push did not finish in time"
            out[run] = failed(state, f"git push to {remote} failed: {why}", head, retry=True)
        elif outcome.status in LANDED:
            out[run] = RunState(seen=head)
        else:
            adopted = _theirs(repo, remote, run, state, head, deadline)
            if isinstance(adopted, RunState):
                out[run] = adopted
            else:
                again[run] = (head, _seen(state, adopted))
    return again


def _theirs(repo: pygit2.Repository, remote: str, run: str, state: RunState, head: str,
            deadline: float, pushed: bool = True) -> RunState | str | None:
    """After a refusal (``pushed``), or before a push the last head seen there
    forbids: the remote's head when the local log extends it (push again from
    there: `git wal push` sent it, or a killed pusher's push landed), else
    the run's error."""
    code, stdout, stderr = git_until(["git", f"--git-dir={common_dir(repo)}", "ls-remote", remote,
                                 LIVE + run], git_cwd(repo), deadline)
    if code != 0:
        return failed(state, f"{remote} could not be read: {stderr}", head, retry=True)
    theirs = next((line.split("\t")[0] for line in stdout.splitlines()
                   if line.split("\t")[-1] == LIVE + run), None)
    if theirs == head:
        return RunState(seen=head)
    if theirs == state.seen:
        if pushed:  # refused for another reason (a server hook)
            return failed(state, f"{remote} refused refs/wal/{run}: {stderr}", head, retry=False)
        return _refused(repo, remote, run, state, head, theirs)
    if theirs is None or ancestor_or_same(repo, theirs, head):
        return theirs
    if ancestor_or_same(repo, head, theirs):
        return RunState(seen=theirs)  # a `git wal push` sent it, and more, meanwhile
    if not archived(repo, run, theirs) and _forked(repo, remote, run, theirs, head, deadline):
        # The run goes on elsewhere (a takeover): fenced here, from what this
        # push saw. The remote's records are read only to name the taker.
        fence = record_fence(repo, remote, run, theirs, head)
        return failed(state, fence.error().message, head, retry=False)
    return _refused(repo, remote, run, state, head, theirs)


def _forked(repo: pygit2.Repository, remote: str, run: str, theirs: str, head: str,
            deadline: float) -> bool:
    """The remote's head shares history with the local log (its chain holds
    appends this clone wrote): the same run, continued elsewhere. Two chains
    with no common append are two runs that chose one id: not a fence."""
    git_until(["git", f"--git-dir={common_dir(repo)}", "fetch", "--no-tags",
               "--no-write-fetch-head", remote,
               f"+{LIVE}{run}:{staging_prefix(remote)}wal/{run}"], git_cwd(repo), deadline)
    try:
        return repo.merge_base(pygit2.Oid(hex=theirs), pygit2.Oid(hex=head)) is not None
    except (KeyError, ValueError, pygit2.GitError):
        return False  # their objects did not come: not seen to fork, not fenced


def git_cwd(repo: pygit2.Repository) -> Path:
    """Where git would run: a remote's relative path (`../server.git`) means
    the same from there as where it was added."""
    return Path(repo.workdir) if repo.workdir else common_dir(repo)


def git_until(args: list[str], cwd: Path, deadline: float) -> tuple[int | None, str, str]:
    """``args`` run until ``deadline`` (then its whole process group is killed):
    exit code (None: killed), stdout, git's reason."""
    proc = subprocess.Popen(args, cwd=cwd, env=git_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
        return None, stdout, last_line(stderr)
    return proc.returncode, stdout, last_line(stderr)
