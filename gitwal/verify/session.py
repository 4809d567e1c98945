"""Reading the runs of one verification: each run's log is read once (every
segment, read past its defects: log/segments.py) and shared by every check
and every other run that asks for it.

A log that cannot be read at all is a failure of its run, never an exception:
the other runs are still verified.

The logs are read under one root (``namespace``): this repository's own refs,
or a copy of a remote's (``refs/wal-remote/<remote>/``, `git wal verify
--remote`). Every ref of a run -- live, archives, detached checkpoints -- and
the other runs the checks consult are read there, so a verification never
mixes two copies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pygit2

from ..base.errors import CorruptLog
from ..log.appends import REF_PREFIX
from ..log.rewrite import ARCHIVE_PREFIX
from ..log.runs import LOCAL, all_runs, archived_heads, under
from ..log.segments import Entry, Failure, Segment, merge_segments, read_segment
from ..records.codec import decode
from ..records.model import Checkpoint, Plan
from ..signing.allowed_signers import AllowedSigner
from .branch import resolve
from .runs_order import Lane, order_failures


@dataclass(frozen=True)
class Loaded:
    segments: tuple[Segment, ...]  # archived segments by n, then the live chain
    history: tuple[Entry, ...]  # every record once, in LSN order
    plan: Plan | None
    failures: tuple[Failure, ...]  # what reading and joining the chains found


class Session:
    """State shared by the runs of one verification: each log is read once."""

    def __init__(self, repo: pygit2.Repository,
                 allowed: Sequence[AllowedSigner] | None = None,
                 namespace: str = LOCAL) -> None:
        self.repo = repo
        self.allowed = allowed  # the allowed-signers entries, read once
        self.namespace = namespace  # the root the logs are read under
        self._loaded: dict[str, Loaded] = {}
        self.runs: Sequence[str] = ()  # the runs being verified
        self._order: list[Failure] | None = None

    def load(self, run: str) -> Loaded:
        if run not in self._loaded:
            try:
                self._loaded[run] = _load(self.repo, run, self.namespace)
            except (LookupError, ValueError, pygit2.GitError) as e:
                # Damage the reader did not foresee (undecodable commit headers,
                # say): this run fails, the others are still verified.
                failure = Failure(run, "chain", f"could not read the log: {e!r}")
                self._loaded[run] = Loaded((), (), None, (failure,))
        return self._loaded[run]

    def order(self, branch: str | None) -> list[Failure]:
        """The order check's failures for every run of the session, found once."""
        if self._order is None:
            if branch is None and not self.repo.head_is_unborn:
                branch = "HEAD" if self.repo.head_is_detached else self.repo.head.name
            found = resolve(self.repo, branch) if branch else None
            lanes = [Lane(r, loaded.plan, loaded.history)
                     for r in self.runs for loaded in (self.load(r),)]
            self._order = order_failures(self.repo, lanes, found[1] if found else None,
                                         found[0] if found else "")
        return self._order

    def others(self, run: str) -> Iterator[tuple[Plan, list[Entry]]]:
        """(plan, history) of every other run whose plan could be read."""
        for other in all_runs(self.repo, self.namespace):
            loaded = self.load(other)
            if other != run and loaded.plan is not None:
                yield loaded.plan, list(loaded.history)


def _load(repo: pygit2.Repository, run: str, root: str) -> Loaded:
    archives = archived_heads(repo, run, root)
    heads = [(under(root, f"{ARCHIVE_PREFIX}{run}/{n}"), head, False) for n, head in archives]
    live_ref = under(root, REF_PREFIX + run)
    live = repo.references.get(live_ref)
    if live is not None:
        heads.append((live_ref, str(live.target), True))
    segments: list[Segment] = []
    # Archives are numbered 1, 2, ... as compactions make them, and written once:
    # a number missing below the highest is compacted history someone deleted.
    failures = [Failure(run, "chain", f"the archive {under(root, ARCHIVE_PREFIX)}{run}/{n} "
                        "is missing (deleted? its records are gone after `git gc`; a copy "
                        "may be on a remote: `git wal fetch`)")
                for n in sorted(set(range(1, max((n for n, _ in archives), default=0)))
                                - {n for n, _ in archives})]
    for ref, head, is_live in heads:
        seg, found = read_segment(repo, run, ref, head, is_live)
        segments.append(seg)
        failures += found
    history, found = merge_segments(run, segments)
    failures += found
    plan, found = _plan(repo, run, history)
    return Loaded(tuple(segments), tuple(history), plan, tuple(failures + found))


def _plan(repo: pygit2.Repository, run: str,
          history: list[Entry]) -> tuple[Plan | None, list[Failure]]:
    """LSN 1, or (log compacted with --drop) the plan blob its first checkpoint names."""
    first = history[0].record if history else None
    if isinstance(first, Plan):
        return first, []
    if not isinstance(first, Checkpoint):
        return None, []  # the chain check already said how the log starts
    blob = repo.get(first.plan)
    why = "is missing"
    if isinstance(blob, pygit2.Blob):
        try:
            plan = decode(blob.data, f"plan blob {first.plan[:12]}")
        except CorruptLog as e:
            why = f"does not decode ({e.message})"
        else:
            if isinstance(plan, Plan) and plan.run == run and plan.lsn == 1:
                return plan, []
            why = "is not this run's plan"
    return None, [Failure(run, "chain", f"the plan blob {first.plan[:12]} named by "
                          f"checkpoint LSN {first.lsn} {why}", first.lsn)]
