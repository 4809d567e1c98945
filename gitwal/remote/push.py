"""`git wal push`: send the selected runs' logs, never forcing one.

``refs/wal/<run>``, ``refs/wal-archive/<run>/<n>`` and
``refs/wal-checkpoints/<run>/<lsn>`` go under the same names with refspecs
that have no ``+``: git refuses any update that is not a fast-forward, and
that refusal is reported per ref, never retried. One update that is not a
fast-forward is sent on purpose, as a compare-and-swap: a run compacted here
replaces the remote's live chain only if the remote's head is exactly the one
read, and an archive pushed first keeps it (``--force-with-lease``), so the
remote loses no record. Nothing is pushed while a log holds an untracked
secret-looking file (docs/security.md "Secrets").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pygit2

from ..base import progress
from ..base.errors import WalError
from ..base.repository import open_repository
from ..log.rewrite import ARCHIVE_PREFIX
from ..log.runs import select_runs
from .cas_push import Update, porcelain, push_args
from .refs import (
    BARE_OK,
    LIVE_PREFIX,
    RefOutcome,
    Transfer,
    ancestor_or_same,
    archived,
    last_line,
    log_refs,
    resolve_remote,
    run_git,
    split_ref,
)
from .secret_scan import refusal

PUSH_BATCH = 200  # refspecs per `git push`: keeps the command line far below ARG_MAX

def _push_batch(cwd: Path, remote: str, refs: Sequence[str],
                leases: dict[str, str]) -> tuple[list[RefOutcome], list[str]]:
    outcomes: list[RefOutcome] = []
    messages: list[str] = []
    for i in range(0, len(refs), PUSH_BATCH):
        batch = refs[i:i + PUSH_BATCH]
        args = push_args(remote, [Update(ref, ref, leases.get(ref)) for ref in batch])
        proc = progress.run_git(cwd, args, f"pushing to {remote}")
        messages += [ln.rstrip() for ln in proc.stderr.splitlines() if ln.startswith("remote:")]
        seen = porcelain(proc.stdout)
        if not seen and proc.returncode != 0:
            raise WalError(f"git push to {remote} failed: {last_line(proc.stderr)}",
                           "check the remote's URL and your access (`git remote -v`); "
                           "nothing was pushed")
        for ref in batch:
            outcomes.append(seen.get(ref) or RefOutcome(
                ref, "rejected", f"git reported nothing for it: {last_line(proc.stderr)}"))
    return outcomes, messages


def _remote_heads(cwd: Path, remote: str, refs: Sequence[str]) -> dict[str, str]:
    proc = run_git(cwd, "ls-remote", remote, *refs)
    if proc.returncode != 0:
        raise WalError(f"cannot read the logs of {remote}: {last_line(proc.stderr)}",
                       "check the remote's URL and your access (`git remote -v`)")
    heads = {}
    for line in proc.stdout.splitlines():
        oid, _, name = line.partition("\t")
        if name in refs:
            heads[name] = oid
    return heads


def _leases(cwd: Path, repo: pygit2.Repository, remote: str,
            local: dict[str, str]) -> dict[str, str]:
    """Live refs compacted here: ref -> the remote head an archive of this push keeps."""
    compacted_runs = set()
    for ref in local:
        where = split_ref(ref)
        if where is not None and where[0] == ARCHIVE_PREFIX:
            compacted_runs.add(where[1])
    live = [f"{LIVE_PREFIX}{run}" for run in sorted(compacted_runs)
            if f"{LIVE_PREFIX}{run}" in local]
    if not live:
        return {}
    leases = {}
    for ref, theirs in _remote_heads(cwd, remote, live).items():
        ours = local[ref]
        if ancestor_or_same(repo, theirs, ours):
            continue  # a plain fast-forward (or nothing to do)
        if archived(repo, ref[len(LIVE_PREFIX):], theirs):
            leases[ref] = theirs
    return leases


def _refuse_secrets(repo: pygit2.Repository, runs: Iterable[str]) -> None:
    """Nothing is pushed when a log holds an untracked secret-looking file."""
    if (refused := refusal(repo, runs)) is not None:
        raise refused


def push(cwd: Path, remote: str | None, run_id: str | None, everything: bool) -> Transfer:
    """Push the selected runs' logs (default: the current run, else every run)."""
    name = resolve_remote(cwd, remote)
    repo = open_repository(cwd, BARE_OK)
    runs = select_runs(repo, run_id, everything)
    _refuse_secrets(repo, runs)
    local = log_refs(repo, runs)
    if not local:
        return Transfer(name, ())
    leases = _leases(cwd, repo, name, local)
    first = sorted(ref for ref in local if ref not in leases)
    outcomes, messages = _push_batch(cwd, name, first, {})
    landed = {o.ref for o in outcomes if o.status in ("created", "up-to-date")}
    second: list[str] = []
    held: list[str] = []
    for ref in sorted(leases):
        run = ref[len(LIVE_PREFIX):]
        archives = [r for r in local if r.startswith(f"{ARCHIVE_PREFIX}{run}/")]
        # The old chain must be on the remote before the live ref leaves it.
        (second if all(a in landed for a in archives) else held).append(ref)
    if second:
        more, msgs = _push_batch(cwd, name, second, leases)
        outcomes += more
        messages += msgs
    outcomes += [RefOutcome(ref, "rejected", "not sent: its archive did not land")
                 for ref in held]
    return Transfer(name, tuple(sorted(outcomes, key=lambda o: o.ref)), tuple(messages))
