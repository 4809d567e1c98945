"""A checkpoint's commit on the user's branch: exactly the snapshot's tree,
committed through a scratch index (the repository's hooks and signing still
apply), and the user's own index carried over to the new commit without
losing what they staged (docs/checkpoints.md "The branch and your index").

Why not ``git add -A`` and ``git commit``: that reads the tree again (an
untracked ``.env`` the snapshot left out would be committed) and rewrites the
user's index, staged changes included.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pygit2

from ..base.ids import TreeId

# Runs git in the working tree with extra environment; raises on failure.
Git = Callable[..., str]
_ZERO = "0" * 40


def commit_tree(repo: pygit2.Repository, run: str, snap: TreeId, message: str,
                git: Git) -> TreeId:
    """Commit ``snap`` onto HEAD with ``git commit`` from a scratch index
    (``.git/wal/index/<run>.checkpoint``, removed after); then carry the
    user's index over. Returns the tree committed (a pre-commit hook may have
    changed the scratch index)."""
    old = repo.head.peel(pygit2.Commit)
    index = Path(repo.path) / "wal" / "index" / f"{run}.checkpoint"
    index.parent.mkdir(parents=True, exist_ok=True)
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git("read-tree", str(snap), env=env)
        git("commit", "-q", "--cleanup=whitespace", "-F", "-", input=message, env=env)
    finally:
        index.unlink(missing_ok=True)
        index.with_name(index.name + ".lock").unlink(missing_ok=True)
    new = repo.head.peel(pygit2.Commit)
    carry_index(repo, old.tree, new.tree, git)
    return TreeId(str(new.tree_id))


def carry_index(repo: pygit2.Repository, old: pygit2.Tree, new: pygit2.Tree,
                git: Git) -> list[str]:
    """Move the user's index from ``old`` (the branch before) to ``new``,
    path by path: an entry that equals ``old``'s (nothing staged there) takes
    ``new``'s; an entry the user staged (or a conflict) stays as it is, so
    what they staged is kept and shows against the new commit. Returns the
    paths updated; git's own index lock guards the write."""
    index = pygit2.Index(str(Path(repo.path) / "index")) \
        if (Path(repo.path) / "index").exists() else None
    lines: list[bytes] = []
    updated: list[str] = []
    for delta in old.diff_to_tree(new).deltas:
        path = delta.new_file.path  # no rename detection: old and new paths agree
        raw = os.fsencode(path)
        was = _entry(old, path)
        have = _index_entry(index, path)
        if have != was:
            continue  # staged by the user (or unmerged): theirs, kept
        want = _entry(new, path)
        if want is None:
            lines.append(b"0 " + _ZERO.encode() + b"\t" + raw + b"\0")
        else:
            lines.append(f"{want[0]:o} {want[1]}\t".encode() + raw + b"\0")
        updated.append(path)
    if lines:
        git("update-index", "-z", "--index-info", input_bytes=b"".join(lines))
    return updated


def _entry(tree: pygit2.Tree, path: str) -> tuple[int, str] | None:
    try:
        obj = tree[path]
    except KeyError:
        return None
    return int(obj.filemode), str(obj.id)


def _index_entry(index: pygit2.Index | None, path: str) -> tuple[int, str] | str | None:
    """(mode, id) of the stage-0 entry; None when absent; "conflict" when unmerged."""
    if index is None:
        return None
    if index.conflicts is not None:
        try:
            index.conflicts[path]
            return "conflict"
        except KeyError:
            pass
    try:
        entry = index[path]
    except KeyError:
        return None
    return int(entry.mode), str(entry.id)
