"""The working tree at a run's last committed step, put in place in another
clone (`git wal resume`, docs/remote-runs.md, "Taking a run over").

The log says what its committed steps left (changes/ledger.py: from the
newest checkpoint's tree, else the base commit's, each path a committed step
set at the state it set). Those paths, and the paths a checkpoint at the
start of the live log changed against the base commit, are the run's; every
other path stays as the branch checked out here has it.

Law 1: a path the resume would write must hold what HEAD has there, or a
state the run's records give it (bytes git or the log keeps), or already the
run's state. Anything else (an edit nobody
committed, an untracked file, a directory in the way) is named and nothing
is written: :func:`plan_tree` decides before the run is taken over, so a
refusal leaves the remote's log as it was.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

import pygit2

from ..base.errors import CorruptLog, WalError
from ..base.ids import ABSENT, TreeId
from ..changes.history import tree_changes
from ..changes.ledger import COMMITTED, fold
from ..records.model import EXEC_TOOL, Checkpoint, Commit, Intent, Plan, Record
from ..worktree.diskform import CommittedForms
from ..worktree.overwrite import found
from ..worktree.restore import Restored, restore_paths
from ..worktree.tree import MODE_FILE, MODE_TREE, Worktree
from ..worktree.treeread import tree_state


@dataclass(frozen=True)
class TreePlan:
    """What the run's paths should hold (state per path, ABSENT: no file), the
    paths already right, and those law 1 keeps from being written (with why)."""

    want: dict[str, str]
    writes: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]
    missing: tuple[str, ...]  # states the log names but does not hold (withheld secrets)
    modes: dict[str, int]  # a path's mode in the shell step's post tree that set its state

    def describe_refused(self) -> str:
        shown = "; ".join(f"{p}: {why}" for p, why in self.refused[:10])
        more = len(self.refused) - 10
        return shown + (f" (and {more} more)" if more > 0 else "")


def _base(repo: pygit2.Repository, plan: Plan, first: Record) -> dict[str, str]:
    """The paths a checkpoint at the head of the live log changed against the
    run's base commit (compacted steps), at the checkpoint's states."""
    if not isinstance(first, Checkpoint):
        return {}
    base = repo.get(plan.base)
    if not isinstance(base, pygit2.Commit):
        return {}  # the base commit is not here: the checkpoint's own tree stands in
    return {c.path: c.after for c in tree_changes(repo, str(base.tree_id), first.tree)}


def logged(repo: pygit2.Repository, records: Iterable[Record]) -> dict[str, set[str]]:
    """Every state a step's records give each path (a file step's pre, post
    and observed post; the states on both sides of a committed shell step's
    trees): bytes the log keeps, which a resume may overwrite (law 1)."""
    out: dict[str, set[str]] = {}
    targets: dict[int, tuple[str, ...]] = {}
    shells: dict[int, str] = {}
    records = list(records)  # in any order: a chain read from its head comes newest first
    for rec in records:
        if isinstance(rec, Intent) and rec.tool == EXEC_TOOL:
            shells[rec.lsn] = rec.pre[0] if rec.pre else ""
        elif isinstance(rec, Intent):
            targets[rec.lsn] = rec.target
            for path, pre, post in zip(rec.target, rec.pre, rec.post or rec.pre, strict=False):
                out.setdefault(path, set()).update((pre, post))
    for rec in records:
        if not isinstance(rec, Commit):
            continue
        if rec.intent in targets:
            for path, post in zip(targets[rec.intent], rec.post, strict=False):
                out.setdefault(path, set()).add(post)
        elif rec.intent in shells and rec.post:
            for change in tree_changes(repo, shells[rec.intent], rec.post[0]):
                out.setdefault(change.path, set()).update((change.before, change.after))
    return out


def plan_tree(wt: Worktree, plan: Plan, records: list[Record],
              also: Iterable[Record] = ()) -> TreePlan:
    """Decide, without writing, what puts the tree at the run's last committed
    step. ``also``: more records of the run whose states the tree may hold (a
    fenced clone's own appends, taken back)."""
    repo = wt.repo
    ledger = fold(wt, records, COMMITTED)
    try:
        ledger.require_base()
    except CorruptLog as e:
        raise WalError(
            f"{e.message}: run {plan.run} starts from commit {plan.base[:12]}"
            + (f" (branch {plan.branch})" if plan.branch else ""),
            "fetch the branch the run began on (`git fetch REMOTE BRANCH`), then resume again",
        ) from None
    want = _base(repo, plan, records[0]) | ledger.expected()
    head = None if repo.head_is_unborn else str(repo.head.peel(pygit2.Tree).id)
    forms = CommittedForms(repo)
    known = logged(repo, records)
    for path, states in logged(repo, also).items():  # a fork's LSNs repeat the run's
        known.setdefault(path, set()).update(states)
    writes: list[str] = []
    refused: list[tuple[str, str]] = []
    missing: list[str] = []
    for path, state in sorted(want.items()):
        have = found(wt, path)
        if have == state:
            continue
        if state != ABSENT and not isinstance(repo.get(state), pygit2.Blob):
            missing.append(path)
            continue
        committed = ABSENT if head is None else tree_state(repo, head, path)
        if have == committed or have in known.get(path, ()) or (
                ABSENT not in (have, committed) and forms.same(path, committed, have)):
            writes.append(path)
        else:
            refused.append((path, _why(have, committed)))
    return TreePlan(want, tuple(writes), tuple(refused), tuple(missing),
                    _exec_modes(repo, records, {p: want[p] for p in writes}))


def _exec_modes(repo: pygit2.Repository, records: list[Record],
                want: dict[str, str]) -> dict[str, int]:
    """The mode of each path in the newest committed shell step's post tree
    that holds it at the wanted state: a script a shell step made executable
    stays executable (a file step keeps the mode the base or HEAD gives)."""
    execs = {r.lsn for r in records if isinstance(r, Intent) and r.tool == EXEC_TOOL}
    trees = [r.post[0] for r in records if isinstance(r, Commit) and r.intent in execs and r.post]
    out: dict[str, int] = {}
    wanted = sum(1 for state in want.values() if state != ABSENT)
    for tree in reversed(trees):
        if len(out) == wanted:
            break
        obj = repo.get(tree)
        if not isinstance(obj, pygit2.Tree):
            continue
        for path, state in want.items():
            if path in out or state == ABSENT:
                continue
            try:
                entry = obj[path]
            except KeyError:
                continue
            if str(entry.id) == state and entry.filemode != MODE_TREE:
                out[path] = int(entry.filemode)
    return out


def _why(have: str, committed: str) -> str:
    if have == "directory":
        return "a directory is in its place"
    if committed == ABSENT:
        return "a file that is not in HEAD (untracked) is in its place"
    return "changed since HEAD and not by this run (commit or stash it first)"


def _mode(repo: pygit2.Repository, trees: list[str | None], path: str) -> int:
    for tree in trees:
        if tree is None:
            continue
        try:
            entry = repo[tree][path]  # type: ignore[index]
        except (KeyError, TypeError):
            continue
        if entry.filemode != MODE_TREE:
            return int(entry.filemode)
    return MODE_FILE


def apply_tree(wt: Worktree, plan: Plan, tree_plan: TreePlan, base: TreeId | None) -> Restored:
    """Write ``tree_plan.writes`` (each checked by :func:`plan_tree` just
    before the run was taken over). Modes come from the shell step that set
    the state (``tree_plan.modes``), else the base tree, else HEAD."""
    repo = wt.repo
    head = None if repo.head_is_unborn else str(repo.head.peel(pygit2.Tree).id)
    index = pygit2.Index()
    if head is not None:
        index.read_tree(repo[head])  # type: ignore[arg-type]
    names = sorted(e.path for e in index)  # read once: each path looked up by bisection
    for path in tree_plan.writes:
        state = tree_plan.want[path]
        if state == ABSENT:
            if path in index:
                index.remove(path)
            continue
        _clear_way(index, names, path)
        mode = pygit2.enums.FileMode(tree_plan.modes.get(path)
                                     or _mode(repo, [base, head], path))
        index.add(pygit2.IndexEntry(path, pygit2.Oid(hex=state), mode))
    target = TreeId(str(index.write_tree(repo)))
    return restore_paths(wt, target, list(tree_plan.writes), tag=f"m{plan.lsn}")


def _clear_way(index: pygit2.Index, names: list[str], path: str) -> None:
    """Drop ``path`` and every entry a file there could not stand beside (an
    ancestor that is a file, anything under it as a directory). ``names``:
    the entries HEAD's tree had, sorted. The ledger's present states never
    put a file under another present file, so no write clears another's."""
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        name = "/".join(parts[:i])
        if name in index:
            index.remove(name)
    under = path + "/"
    at = bisect.bisect_left(names, under)
    while at < len(names) and names[at].startswith(under):
        if names[at] in index:
            index.remove(names[at])
        at += 1
