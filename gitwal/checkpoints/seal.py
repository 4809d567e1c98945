"""`git wal seal`: end a run with a signed ``seal`` record (docs/format.md).

A log whose newest appends were cut off is still a valid chain; only a seal
tells a reader that nothing is missing at the end (`git wal verify
--require-sealed`). Invariants:

* a seal is the last record of its run: Store.append refuses anything after it;
* a seal is signed: it is refused when no signing key is configured;
* a seal is written only when no intent is open, and only for a working tree
  the log explains (``tree``): every path that changed since the base (the
  newest checkpoint's tree, else the base commit's) holds the state a
  committed step, or an ``unlogged`` record, left it in (the ledger,
  gitwal/changes/ledger.py, with ``unlogged`` records counted).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base.errors import WalError
from ..base.ids import ABSENT, CommitId, Lsn, TreeId
from ..changes.ledger import EXPLAINED, Ledger, fold
from ..log.store import Ref, RunSealed
from ..records.model import Intent, Seal
from ..remote.claim_push import drop_remote
from ..run import Run
from ..worktree.tree import Worktree
from ..worktree.treeread import tree_state

__all__ = ["RunSealed", "SealRefused", "SealResult", "seal", "tree_problems"]

MAX_PATHS = 10  # paths named in a refusal; past this, "... and N more"


class SealRefused(WalError):
    """The run cannot be sealed now (open intent, no key, tree the log does not explain)."""


@dataclass(frozen=True)
class SealResult:
    lsn: Lsn
    last: Lsn
    head: CommitId  # the append the seal follows
    tree: TreeId
    commit: CommitId  # the signed append that holds the seal
    fingerprint: str  # of the key that signed it


def tree_problems(trees: Worktree, ledger: Ledger, tree: TreeId) -> list[str]:
    """Why ``tree`` is not what the ledger (EXPLAINED, with a base tree) leaves, path by path
    (empty: it is)."""
    repo, base = trees.repo, ledger.require_base()
    expected = ledger.expected()
    out = []
    for path in trees.changed_paths(base, tree):
        if path not in expected:
            out.append(f"{path} changed ({_short(tree_state(repo, base, path))} -> "
                       f"{_short(tree_state(repo, tree, path))}) but no step or unlogged "
                       "record explains it")
    for path, want in sorted(expected.items()):
        have = tree_state(repo, tree, path)
        if have != want:
            out.append(f"{path} is {_short(have)}, but the log leaves it {_short(want)}")
    return out


def _short(oid: str) -> str:
    return oid if oid == ABSENT else oid[:12]


def seal(run: Run) -> SealResult:
    """Append the run's signed ``seal`` record; refused when it cannot be final and true."""
    store, wt = run.store, run.wt
    with store.locked():
        head = store.head()
        assert head is not None  # Wal.run() found the log
        records = store.segment()
        last = records[-1]
        if isinstance(last, Seal):
            raise RunSealed(f"run {run.id} is sealed already (LSN {last.lsn})",
                            "a sealed run is finished; start a new one with `git wal begin`")
        if isinstance(last, Intent):
            raise SealRefused(f"run {run.id}: intent LSN {last.lsn} ({last.tool} "
                              f"{' '.join(last.target)}) is open",
                              f"run `git wal recover --run {run.id}` first, then seal")
        key = store.signer
        if key is None:
            raise SealRefused(
                "a seal must be signed, and no signing key is configured (wal.signingKey)",
                "create one with `git wal keygen --configure` (or point `git config "
                "wal.signingKey PATH` at an Ed25519 key), trust it with `git wal trust "
                "add`, then seal",
            )
        ledger = fold(wt, records, EXPLAINED)
        snap = wt.snapshot(run.id)
        problems = [] if ledger.base is None else tree_problems(wt, ledger, snap)
        if ledger.base is None or problems:
            shown = problems[:MAX_PATHS] + (
                [f"... and {len(problems) - MAX_PATHS} more"] if len(problems) > MAX_PATHS
                else [])
            raise SealRefused(
                "the working tree is not what the log explains: " + (
                    "; ".join(shown) if problems else "the base commit is missing"),
                "record the changes as steps, undo them, or disclose them with `git wal "
                "checkpoint --detached --include-unlogged`, then seal",
            )
        rec = Seal(run.id, Lsn(last.lsn + 1), last.lsn, head, snap)
        commit = store.append([rec], [Ref(snap, is_tree=True)], head)
        done = SealResult(rec.lsn, last.lsn, head, snap, commit, key.fingerprint)
    drop_remote(store.repo, run.id)  # a seal ends its claims, on the remote too
    return done
