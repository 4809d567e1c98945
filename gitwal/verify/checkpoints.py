"""The checkpoint checks of `git wal verify`: each checkpoint record's fields
follow from the records before it, and its tree is the previous tree plus the
committed steps since (docs/verify.md).

Git objects only (no working tree), so they run in a bare mirror as well.
"""

from __future__ import annotations

import pygit2
from pygit2.enums import ObjectType

from ..base.ids import TreeId
from ..changes.ledger import Fold, Ledger, Rules
from ..log.rewrite import CHECKPOINT_PREFIX
from ..log.runs import LOCAL, under
from ..log.segments import Entry, Failure
from ..records.model import Checkpoint, Commit, Intent, Plan, Record
from ..worktree.diskform import CommittedForms
from ..worktree.tree import blob_id
from ..worktree.treeread import tree_state
from .objects import is_kind
from .replay import MAX_PATHS, TreeView, intents_of, short


def checkpoint_failures(repo: pygit2.Repository, run: str, history: list[Entry],
                        plan: Plan | None, root: str = LOCAL) -> list[Failure]:
    """Each checkpoint's fields follow from the records before it, and its tree is the
    previous tree (the base commit's, first) plus the committed steps since. Detached
    checkpoint refs are looked up under ``root`` (where the log was read)."""
    out: list[Failure] = []
    intents = intents_of(history)
    trees = TreeView(repo)
    plan_blob = next((blob_id(e.raw) for e in history if isinstance(e.record, Plan)), None)
    base: str | None = None
    label = "the base commit"
    if plan is not None and history and isinstance(history[0].record, Plan):
        commit = repo.get(plan.base)
        if isinstance(commit, pygit2.Commit):
            base = str(commit.tree_id)
        else:
            out.append(Failure(run, "checkpoint", f"the base commit {short(plan.base)} is "
                               "missing: checkpoint trees cannot be replayed", 1))
    prev: Checkpoint | None = None
    since: list[Record] = []
    # The committed steps since the previous checkpoint (the ledger starts over
    # at each one); a closing it cannot apply is another check's failure.
    ledger = Fold(trees, Ledger.start(repo, history[0].record if history else None,
                                      Rules(lenient=True)))
    for e in history:
        cp = e.record
        if not isinstance(cp, Checkpoint):
            since.append(cp)
            ledger.feed(cp)
            continue
        reasons = [] if e is history[0] else _field_problems(cp, prev, since, intents)
        reasons += _ref_problems(repo, run, cp, plan_blob, root)
        if base is not None and is_kind(repo, cp.tree, ObjectType.TREE):
            reasons += _tree_problems(repo, trees, TreeId(base), cp, ledger.expected(), label)
        out += [Failure(run, "checkpoint", reason, cp.lsn) for reason in reasons]
        ledger.feed(cp)
        base = cp.tree if is_kind(repo, cp.tree, ObjectType.TREE) else None
        label = f"checkpoint LSN {cp.lsn}"
        prev, since = cp, []
    return out


def _ref_problems(repo: pygit2.Repository, run: str, cp: Checkpoint,
                  plan_blob: str | None, root: str) -> list[str]:
    """The plan blob, the commit and (detached) the ref the record names agree with it."""
    out = []
    if plan_blob is not None and cp.plan != plan_blob:
        out.append(f"names plan blob {short(cp.plan)}, but the plan record is "
                   f"{short(plan_blob)}")
    commit = repo.get(cp.git)  # may be gone (a rewritten branch): nothing keeps it alive
    if commit is not None and (not isinstance(commit, pygit2.Commit)
                               or str(commit.tree_id) != cp.tree):
        out.append(f"commit {short(cp.git)} does not have the recorded tree {short(cp.tree)}")
    if cp.ref.startswith(CHECKPOINT_PREFIX):
        want = f"{CHECKPOINT_PREFIX}{run}/{cp.lsn}"
        where = under(root, want)
        ref = repo.references.get(where)
        if cp.ref != want:
            out.append(f"ref {cp.ref} is not {want}")
        elif ref is None:  # gitwal writes it once and never deletes it
            out.append(f"the detached checkpoint {where} is missing (deleted? after "
                       "`git gc` its commit is gone too; a copy may be on a remote: "
                       "`git wal fetch`)")
        elif str(ref.target) != cp.git:
            out.append(f"{where} points at {short(str(ref.target))}, not at {short(cp.git)}")
    return out


def _field_problems(cp: Checkpoint, prev: Checkpoint | None, since: list[Record],
                    intents: dict[int, Intent]) -> list[str]:
    """covers, committed and done_steps, as `git wal checkpoint` computes them."""
    commits = [r for r in since if isinstance(r, Commit)]
    covers = commits[-1].intent if commits else (prev.covers if prev else 0)
    committed = (prev.committed if prev else 0) + len(commits)
    steps = set(prev.done_steps if prev else ())
    steps |= {s for c in commits if (i := intents.get(c.intent)) and (s := i.step) is not None}
    out = []
    if cp.covers != covers:
        out.append(f"covers LSN {cp.covers}, but the last committed intent before it is "
                   f"LSN {covers}")
    if cp.committed != committed:
        out.append(f"counts {cp.committed} committed intents, the log has {committed}")
    if tuple(sorted(steps)) != cp.done_steps:
        out.append(f"done_steps {list(cp.done_steps)}, the committed intents carry out "
                   f"{sorted(steps)}")
    return out


def _tree_problems(repo: pygit2.Repository, trees: TreeView, base: TreeId, cp: Checkpoint,
                   expected: dict[str, str], label: str) -> list[str]:
    """``cp``'s tree against ``base`` plus the states committed steps left since."""
    tree = TreeId(cp.tree)
    allowed = set(cp.unlogged)
    out: list[str] = []
    for path in trees.changed_paths(base, tree):
        if path not in expected and path not in allowed:
            out.append(f"its tree changes {path} ({short(tree_state(repo, base, path))} -> "
                       f"{short(tree_state(repo, tree, path))}) since {label}, but no "
                       "committed step did and the record does not list it as unlogged")
    forms = CommittedForms(repo)  # the tree is git's form, the log's states the bytes on disk
    for path, want in sorted(expected.items()):
        have = tree_state(repo, tree, path)
        if not forms.same(path, have, want) and path not in allowed:
            out.append(f"its tree holds {path} = {short(have)}, but the committed steps "
                       f"since {label} leave it {short(want)}")
    if len(out) > MAX_PATHS:
        out[MAX_PATHS:] = [f"... and {len(out) - MAX_PATHS} more path(s) that differ"]
    return out
