"""Before a push: does a run's log hold an untracked secret-looking file?

Logs written before snapshots left secrets out (gitwal/worktree/secrets.py) may hold
``.env`` and the like in their snapshot trees or ``unlogged`` records. A
remote guarded by gitwal's pre-receive hook never lets a log shrink, so once
pushed such a file cannot be taken back: `git wal push` refuses the run
instead (docs/security.md "Secrets").

A path counts when it matches a secret pattern, is present in a tree the log
keeps (an exec step's pre or post tree, a checkpoint's tree, any tree an
append keeps alive), named with content by an ``unlogged`` record, or given
an image by a file step's intent, commit or saved blob that an append keeps
(a ``withheld`` image is an id only: nothing is sent), and is absent from the
run's base commit (a file tracked there is in git already).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

import pygit2
from pygit2.enums import DeltaStatus, ObjectType

from ..base.display import safe
from ..base.errors import CorruptLog, WalError
from ..base.ids import ABSENT, RunId
from ..log.chain import Chain
from ..log.rewrite import ARCHIVE_PREFIX
from ..log.segments import Segment, object_kind, read_segment
from ..records.model import Abort, Checkpoint, Commit, Intent, Plan, Unlogged
from ..worktree import secrets
from ..worktree.treeread import tree_state


class SecretInLog(WalError):
    """A run's log holds an untracked secret-looking file: it is not pushed."""


@dataclass(frozen=True)
class Leak:
    run: str
    path: str
    where: str  # which record or tree holds it


def _heads(repo: pygit2.Repository, run: str) -> list[tuple[str, str]]:
    out = []
    live = repo.references.get(f"refs/wal/{run}")
    if live is not None:
        out.append((live.name, str(live.target)))
    prefix = f"{ARCHIVE_PREFIX}{run}/"
    out += [(name, str(repo.references[name].target)) for name in repo.references
            if name.startswith(prefix)]
    return out


def _base_tree(repo: pygit2.Repository, run: str, seg: Segment) -> pygit2.Tree | None:
    entries = seg.entries
    if not entries:
        return None
    first = entries[0].record
    try:
        plan = first if isinstance(first, Plan) else Chain(repo, RunId(run)).plan(first)
        commit = repo[plan.base]
    except (CorruptLog, KeyError, ValueError):
        return None  # no base to compare with: every matching path counts
    return commit.tree if isinstance(commit, pygit2.Commit) else None


def _trees(seg: Segment) -> list[tuple[str, str]]:
    """(tree id, where) of every tree the segment names or keeps."""
    out: list[tuple[str, str]] = []
    intents: dict[int, Intent] = {}
    for e in seg.entries:
        rec = e.record
        if isinstance(rec, Intent) and rec.tool == "exec":
            intents[rec.lsn] = rec
            out.append((rec.pre[0], f"the pre tree of exec step LSN {rec.lsn}"))
        elif isinstance(rec, Commit) and rec.intent in intents:
            out.append((rec.post[0], f"the post tree of exec step LSN {rec.intent}"))
        elif isinstance(rec, Checkpoint):
            out.append((rec.tree, f"the tree of checkpoint LSN {rec.lsn}"))
    for a in seg.appends:
        out += [(oid, f"a tree kept by append {a.oid[:12]}") for oid in sorted(a.objects)]
    return out


def _images(seg: Segment) -> list[tuple[str, str, str]]:
    """(path, blob id, where) of every file image a record of the segment names:
    a file intent's pre and post, its commit's post, a saved blob."""
    out: list[tuple[str, str, str]] = []
    intents: dict[int, Intent] = {}
    for e in seg.entries:
        rec = e.record
        if isinstance(rec, Intent) and rec.tool != "exec" and rec.post is not None:
            intents[rec.lsn] = rec
            for path, pre, post in zip(rec.target, rec.pre, rec.post, strict=True):
                out += [(path, pre, f"the pre-image of file step LSN {rec.lsn}"),
                        (path, post, f"the post-image of file step LSN {rec.lsn}")]
        elif isinstance(rec, Commit) and (i := intents.get(rec.intent)) is not None:
            out += [(path, post, f"the commit of file step LSN {i.lsn}")
                    for path, post in zip(i.target, rec.post, strict=False)]
        if isinstance(rec, Abort):
            out += [(path, oid, f"a blob abort LSN {rec.lsn} saved")
                    for path, oid in rec.saved if path != "."]
    return out


def scan(repo: pygit2.Repository, run: str) -> list[Leak]:
    """Every untracked secret-looking path the log of ``run`` would send."""
    match = secrets.matcher(secrets.patterns(repo))
    leaks: dict[str, Leak] = {}
    seen: set[str] = set()
    for ref, head in _heads(repo, run):
        seg, _failures = read_segment(repo, run, ref, head, live=ref.startswith("refs/wal/"))
        base = _base_tree(repo, run, seg)
        for e in seg.entries:
            rec = e.record
            if isinstance(rec, Unlogged):
                for path, have in zip(rec.paths, rec.observed, strict=False):
                    if (have != ABSENT and path not in leaks and match(path)
                            and (base is None or tree_state(repo, str(base.id), path) == ABSENT)):
                        leaks[path] = Leak(run, path, f"unlogged record LSN {rec.lsn}")
        # A record may name a secret's image by id (withheld: docs/format.md);
        # it leaks only when an append keeps the blob, which push would send.
        kept = frozenset().union(*(a.objects for a in seg.appends))
        for path, oid, where in _images(seg):
            if (oid in kept and path not in leaks and match(path)
                    and (base is None or tree_state(repo, str(base.id), path) == ABSENT)):
                leaks[path] = Leak(run, path, where)
        for oid, where in _trees(seg):
            if oid in seen or object_kind(repo, oid) != ObjectType.TREE:
                continue
            seen.add(oid)
            tree = repo[oid]
            assert isinstance(tree, pygit2.Tree)
            diff = base.diff_to_tree(tree) if base is not None else tree.diff_to_tree(swap=True)
            for delta in diff.deltas:
                if delta.status != DeltaStatus.ADDED:
                    continue
                path = os.fsdecode(delta.new_file.raw_path)
                if path not in leaks and match(path):
                    leaks[path] = Leak(run, path, where)
    return sorted(leaks.values(), key=lambda leak: leak.path)


def refusal(repo: pygit2.Repository, runs: Iterable[str]) -> SecretInLog | None:
    """Why no log of ``runs`` may be pushed, or None: `git wal push` and the
    replication of appends (remote/replicate.py) ask this one check.

    A guarded remote keeps every record for good, so a push is the last point
    at which such a file can stay on this machine (docs/security.md "Secrets").
    """
    leaks = [leak for run in runs for leak in scan(repo, run)]
    if not leaks:
        return None
    first = leaks[0]
    more = f" (and {len(leaks) - 1} more path(s))" if len(leaks) > 1 else ""
    return SecretInLog(
        f"refusing to push run {first.run}: its log holds {safe(first.path)}, which matches a "
        f"secret pattern and is not tracked in the run's base commit ({first.where}){more}; "
        "nothing was pushed",
        f"if it is not a secret, allow it with `git config --add wal.secretPattern "
        f"{shlex.quote('!/' + first.path)}` and push again; if it is, keep this run here "
        "(`git wal push --run OTHER` sends other runs) and treat the secret as exposed "
        "wherever the log was copied")
