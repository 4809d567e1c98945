"""The branch check of `git wal verify`: is every change on the branch in a log?

Every path that differs between the run's base commit and the branch tip must
hold a state the log gave it: the post-image of a committed step (of this run,
or of a run that began later on the same line of history, so that runs in
sequence on one branch explain each other), or the state a checkpoint recorded
for a path it listed as unlogged. "A state the log gave it", not only the last
one: a branch may stop at a checkpoint while later steps are still only in the
working tree. Anything else is *unlogged*, and the commits in base..tip that
introduced it are named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pygit2
from pygit2.enums import ObjectType, SortMode

from ..base.ids import ABSENT, TreeId
from ..changes.ledger import Fold, Ledger, Rules
from ..log.segments import Entry, Failure, object_kind
from ..records.model import Checkpoint, Plan
from ..worktree.diskform import CommittedForms
from ..worktree.treeread import tree_state
from .replay import TreeView, short

States = dict[str, list[str]]  # path -> the states the log gave it, oldest first
MAX_NAMED = 3  # commits named per path; the rest are counted


def resolve(repo: pygit2.Repository, name: str) -> tuple[str, pygit2.Commit] | None:
    """(full ref or revision, its commit) for a branch name, ref or revision."""
    candidates = [name] if name.startswith("refs/") else [f"refs/heads/{name}", name]
    for cand in candidates:
        ref = repo.references.get(cand) if cand.startswith("refs/") else None
        if ref is not None:
            try:
                return cand, ref.peel(pygit2.Commit)
            except (pygit2.InvalidSpecError, ValueError, pygit2.GitError):
                return None
    try:
        return name, repo.revparse_single(name).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.InvalidSpecError, pygit2.GitError):
        return None


def _tree_of(repo: pygit2.Repository, commit_id: str) -> TreeId | None:
    commit = repo.get(commit_id)
    return TreeId(str(commit.tree_id)) if isinstance(commit, pygit2.Commit) else None


def logged_states(repo: pygit2.Repository, history: list[Entry], base: str,
                  into: States | None = None) -> States:
    """Every state the committed steps (and checkpoint-listed unlogged paths) gave a path
    (the states the ledger's fold sets along the way, gitwal/changes/ledger.py).

    A log whose records before a checkpoint were dropped starts with that
    checkpoint: its tree is then the log's word for every path it changed
    since ``base``, the run's base commit.
    """
    out: States = {} if into is None else into
    trees = TreeView(repo)

    def add(path: str, state: str) -> None:
        seen = out.setdefault(path, [])
        if state not in seen:
            seen.append(state)

    first = history[0].record if history else None
    base_tree = _tree_of(repo, base)
    if (isinstance(first, Checkpoint) and base_tree is not None
            and object_kind(repo, first.tree) == ObjectType.TREE):
        for path in trees.changed_paths(base_tree, TreeId(first.tree)):
            add(path, tree_state(repo, first.tree, path))
    # Every state the ledger's fold sets, not only the last; a closing it cannot
    # apply explains nothing (the intent and closing checks name it).
    running = Fold(trees, Ledger.start(repo, first, Rules(lenient=True)))
    for e in history:
        r = e.record
        if isinstance(r, Checkpoint) and object_kind(repo, r.tree) == ObjectType.TREE:
            for path in r.unlogged:
                add(path, tree_state(repo, r.tree, path))
        for path, held in running.feed(r):
            add(path, held.state)
    return out


def _reaches(repo: pygit2.Repository, commit: str, ancestor: str) -> bool:
    """``ancestor`` is ``commit`` or one of its ancestors."""
    try:
        return commit == ancestor or repo.descendant_of(commit, ancestor)
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _within(repo: pygit2.Repository, base: str, tip: str, other: str) -> bool:
    """A run based on ``other`` began on the stretch base..tip of the branch."""
    return _reaches(repo, other, base) and _reaches(repo, tip, other)


def branch_failures(
    repo: pygit2.Repository, run: str, plan: Plan, branch: str, tip: pygit2.Commit,
    own: States, others: Callable[[], Iterable[tuple[Plan, list[Entry]]]],
) -> list[Failure]:
    """Unlogged changes on ``branch`` since ``plan.base``, with the commits that made them."""
    base = repo.get(plan.base)
    if not isinstance(base, pygit2.Commit):
        return [Failure(run, "branch", f"the base commit {short(plan.base)} is missing: "
                        f"{branch} cannot be checked")]
    tip_id = str(tip.id)
    if not _reaches(repo, tip_id, plan.base):
        return [Failure(run, "branch", f"{branch} ({short(tip_id)}) does not contain the "
                        f"run's base commit {short(plan.base)} (rebased or reset?): its "
                        "changes cannot be attributed; pass --branch")]
    trees = TreeView(repo)
    base_tree, tip_tree = TreeId(str(base.tree_id)), TreeId(str(tip.tree_id))
    changed = {p: tree_state(repo, tip_tree, p) for p in trees.changed_paths(base_tree, tip_tree)}
    states = own
    consulted: list[str] = []
    if any(s not in states.get(p, ()) for p, s in changed.items()):
        # Only now read the other runs: most branches are explained by their own run.
        states = {p: list(v) for p, v in own.items()}
        for other_plan, history in others():
            if _within(repo, plan.base, tip_id, other_plan.base):
                logged_states(repo, history, other_plan.base, into=states)
                consulted.append(other_plan.run)
    # The branch holds git's form, the log the bytes on disk (worktree/diskform.py).
    forms = CommittedForms(repo)
    bad = {p: s for p, s in changed.items()
           if not any(forms.same(p, s, held) for held in states.get(p, ()))}
    if not bad:
        return []
    shown = branch.removeprefix("refs/heads/")
    culprits = _introducers(repo, plan.base, tip, bad, states)
    out = []
    for path, state in sorted(bad.items()):
        named = culprits.get(path, [])
        by = ", ".join(f'{str(c.id)[:12]} "{c.message.splitlines()[0] if c.message else ""}"'
                       for c in named[:MAX_NAMED])
        if len(named) > MAX_NAMED:
            by += f" and {len(named) - MAX_NAMED} more"
        made = f"introduced by {by}" if by else "no single commit in base..tip introduced it"
        # Name the other runs whose logs were read: their records count here too.
        logs = f" of {run} or {', '.join(consulted)}" if consulted else ""
        if path not in states:
            what = f"no committed step{logs} changed it"
        else:
            what = (f"it is {short(state)} there, a state no committed step{logs} left it in "
                    f"(the last logged: {short(states[path][-1])})")
        out.append(Failure(run, "unlogged", f"{path} changed on {shown} outside the log: "
                           f"{what}; {made}"))
    return out


def _introducers(repo: pygit2.Repository, base: str, tip: pygit2.Commit, bad: dict[str, str],
                 states: States) -> dict[str, list[pygit2.Commit]]:
    """Commits in base..tip that gave a bad path a state the log does not explain.

    A merge counts only where its result differs from every parent (a change
    made in the merge itself); otherwise the side commit that made it is named.
    """
    walker = repo.walk(tip.id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(pygit2.Oid(hex=base))
    out: dict[str, list[pygit2.Commit]] = {}
    for commit in walker:
        parents = [str(p.tree_id) for p in commit.parents]
        tree = str(commit.tree_id)
        for path in bad:
            state = tree_state(repo, tree, path)
            before = [tree_state(repo, t, path) for t in parents] or [ABSENT]
            if all(state != b for b in before) and state not in states.get(path, ()):
                out.setdefault(path, []).append(commit)
    return out
