"""`git wal resume RUN`: a run goes on in this clone, from its remote
(docs/remote-runs.md, "Taking a run over").

Order, each step safe to repeat after a crash:

1. fetch the run and integrate it (create, or fast-forward the local log);
2. decide what puts the tree at the run's last committed step, and refuse,
   naming the paths, if that would overwrite bytes HEAD does not hold
   (materialize.py): nothing is taken over then;
3. under the run lock, append one record batch: an ``abort`` of the open
   intent, if any (in this clone's tree the step did not happen: the tree
   is put at its pre-image), and the ``takeover``; push it by compare-and-
   swap from the fetched head (remote/takeover.py). A lost race takes the
   append back, and nothing else has changed;
4. bind the run to this worktree, write the tree, make the run current;
5. report as recovery does, and print the resume prompt.

A resume that stopped after its append and before its push finds its own
takeover at the log's end and pushes it again; after the push, it finds the
log up to date and writes what the tree still lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import RunBusy, UnknownRun, WalError
from ..base.ids import CommitId, Lsn, RunId, valid_run_id
from ..changes.ledger import base_tree
from ..log.store import Store
from ..records.model import EXEC_TOOL, Abort, Approval, Intent, Record, Seal, Takeover
from ..remote.claim_push import end_taken_over
from ..remote.fence import lift
from ..remote.replica_state import bind_here, remote_of
from ..remote.takeover import Fetched, fetch_run, push_takeover, taken_here, takeover_record
from ..signing.signer import configured_signer
from ..worktree.tree import Worktree
from .decide import Recovery
from .materialize import apply_tree, plan_tree
from .prompt import render
from .report import Report

PUSH_TIMEOUT = 60.0  # how long the takeover's push may take


@dataclass(frozen=True)
class Resumed:
    """What `git wal resume` did, and the run's report afterwards."""

    run: str
    remote: str
    taken_from: str  # the remote's head the run was taken over from
    takeover: Lsn  # the takeover record
    closed: Intent | None  # the intent that was open, closed as not applied here
    written: tuple[str, ...]  # paths put at the run's state
    skipped: tuple[tuple[str, str], ...]  # paths that could not be written, and why
    missing: tuple[str, ...]  # paths whose state the log withholds (secrets)
    report: Report

    def to_dict(self) -> dict[str, Any]:
        prompt = render(self.report)
        closed = None if self.closed is None else {
            "lsn": self.closed.lsn, "tool": self.closed.tool,
            "target": list(self.closed.target),
            "outcome": "in-doubt" if self.closed.tool == EXEC_TOOL else "not-applied"}
        return {"run": self.run, "remote": self.remote, "taken_from": self.taken_from,
                "takeover": self.takeover, "closed": closed, "written": list(self.written),
                "skipped": [{"path": p, "why": w} for p, w in self.skipped],
                "missing": list(self.missing),
                "report": self.report.to_dict() | {"prompt": prompt}, "prompt": prompt}


def _open_intent(records: list[Record]) -> Intent | None:
    """The open intent at the log's end (an approval of it may follow)."""
    for rec in reversed(records):
        if isinstance(rec, Approval):
            continue
        return rec if isinstance(rec, Intent) else None
    return None


def _abort(run: RunId, lsn: Lsn, intent: Intent, remote: str) -> Abort:
    why = (f"recovery: not applied in this clone: run taken over from {remote} while this "
           "step was open; the tree is at its pre-image; redo it")
    if intent.tool == EXEC_TOOL:
        why += (" (its command may have run on the machine that lost the run: what it did "
                "outside the working tree is not known)")
    return Abort(run, lsn, intent.lsn, why, ())


def resume(wt: Worktree, run: str, remote: str | None) -> Resumed:
    """Take ``run`` over from ``remote`` (else the run's remote, else the
    branch's upstream remote or ``origin``) and put the tree where it stood."""
    repo = wt.repo
    if not valid_run_id(run):
        raise UnknownRun(f"invalid run id {run!r}",
                         "`git ls-remote REMOTE 'refs/wal/*'` lists the runs a remote has")
    fetched = fetch_run(repo, Path(wt.root), remote or remote_of(repo, run), run)
    store = Store(repo, RunId(run), configured_signer(repo))
    head = store.head()
    assert head is not None  # integrated just now
    records = store.segment()
    if isinstance(records[-1], Seal):
        raise WalError(f"run {run} is sealed (LSN {records[-1].lsn}): it is finished, there "
                       "is nothing to resume", f"read it with `git wal log --run {run}`")
    ours = taken_here(repo, records)
    if ours is not None and ours.taken != fetched.theirs and head != fetched.theirs:
        ours = None  # an older takeover of this clone: the run moved on since
    if fetched.outcome.status == "ahead" and ours is None:
        raise WalError(
            f"this clone's log of run {run} has appends {fetched.remote} lacks: the run "
            "was written here",
            f"send them (`git wal push {fetched.remote} --run {run}`), or go on with it "
            f"here (`git wal recover --run {run}`)")
    plan = store.plan(records[0])
    # A fenced clone taking its run back: its own appends' states are the log's too.
    fork = [] if fetched.fork is None else [r for _c, b in store.chain(fetched.fork) for r in b]
    tree = plan_tree(wt, plan, records, fork)
    if tree.refused:
        raise WalError(
            f"run {run}: {len(tree.refused)} path(s) the run changed hold work that is "
            f"not in HEAD: {tree.describe_refused()}; nothing was taken over",
            "commit or stash those changes (or resume in a clean clone), then resume again")
    taken, closed = _take(store, fetched, head, records, ours, Path(wt.root))
    lift(repo, fetched.remote, run)
    bind_here(repo, run)
    end_taken_over(repo, fetched.remote, run)  # its claims ended with the takeover
    tree = plan_tree(wt, plan, store.segment(), fork)  # what the tree needs now
    if tree.refused:
        raise WalError(
            f"run {run} was taken over, but {len(tree.refused)} path(s) changed meanwhile: "
            f"{tree.describe_refused()}", "commit or stash them, then resume again")
    done = apply_tree(wt, plan, tree, base_tree(repo, records[0]))
    with store.locked(wait=False):
        report = Recovery(store, wt, False, False).run()
    return Resumed(run, fetched.remote, fetched.theirs, taken, closed, done.done, done.skipped,
                   tree.missing, report)


def _take(store: Store, fetched: Fetched, head: CommitId, records: list[Record],
          ours: Takeover | None, root: Path) -> tuple[Lsn, Intent | None]:
    """Append the takeover (and the abort of an open intent) and push it by
    compare-and-swap; its LSN and the intent it closed."""
    repo, run = store.repo, store.run
    if ours is not None:  # resumed here before: push it again unless it landed
        closed = [r.intent for r in store.head_records(head) if isinstance(r, Abort)]
        intent = next((r for r in records if isinstance(r, Intent) and r.lsn in closed), None)
        if head != fetched.theirs:
            push_takeover(store, fetched.remote, head, CommitId(ours.taken), PUSH_TIMEOUT)
        return ours.lsn, intent
    with store.locked(wait=False):
        if store.head() != head:
            raise RunBusy(f"run {run} moved while it was being resumed",
                          "run `git wal resume` again")
        lsn = Lsn(records[-1].lsn + 1)
        batch: list[Record] = []
        open_ = _open_intent(records)
        if open_ is not None:
            batch.append(_abort(run, lsn, open_, fetched.remote))
            lsn = Lsn(lsn + 1)
        batch.append(takeover_record(repo, run, lsn, root, fetched.remote, fetched.theirs))
        new = store.append(batch, [], head)
        push_takeover(store, fetched.remote, new, fetched.theirs, PUSH_TIMEOUT)
    return lsn, open_
