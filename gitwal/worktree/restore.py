"""Undoing a shell step: putting the paths it changed back to the pre tree.

Removals first, deepest first, then the writes, so a file that became a
directory (or a directory that became a file or a symlink) can be put back.
Every operation goes through the working tree's confined walk
(:meth:`Worktree.parent_dir`): a symlink the command made is removed as a
link, never written through. A directory is removed only when it is empty
once the paths being restored are gone and the pre tree has no directory
there. A path that cannot be put back safely is left as it is and reported.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from ..base.crashpoints import crash_point
from ..base.durable_at import open_dir_at, rmdir_at, unlink_at
from ..base.errors import PathRefused, WalError
from ..base.ids import TreeId
from .confine import NoParent, lstat_at
from .tree import MODE_GITLINK, MODE_TREE, Worktree


@dataclass(frozen=True)
class Restored:
    """The paths put back to the tree's state, and those left as they are,
    each with the reason."""

    done: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = ()

    def describe_skipped(self) -> str:
        return "; ".join(f"{p}: {why}" for p, why in self.skipped)


def restore_paths(wt: Worktree, tree: TreeId, paths: list[str], tag: str) -> Restored:
    """Put each of ``paths`` back to its state in ``tree`` (``tag``: temp files)."""
    t = wt.repo[tree]
    assert isinstance(t, pygit2.Tree)

    def entry(rel: str) -> pygit2.Object | None:
        try:
            return t[rel]
        except KeyError:
            return None

    def in_tree_as_dir(rel: str) -> bool:
        e = entry(rel)
        return e is not None and e.filemode in (MODE_TREE, MODE_GITLINK)

    writes = {p: e for p in paths if (e := entry(p)) is not None
              and e.filemode not in (MODE_TREE, MODE_GITLINK)}
    # Every directory that may have to go: the paths themselves (a file that
    # became a directory) and their ancestors the tree has no directory at.
    dirs = {a for p in paths for a in [p, *_ancestors(p)] if not in_tree_as_dir(a)}
    actions = sorted({(p, False) for p in paths if p not in writes}
                     | {(d, True) for d in dirs},
                     key=lambda a: (-a[0].count("/"), a[0], a[1]))
    done: set[str] = set()
    skipped: dict[str, str] = {}
    steps = 0

    def step() -> None:
        """Before each change: the second one is the ``mid-restore`` point."""
        nonlocal steps
        if steps == 1:
            crash_point("mid-restore")
        steps += 1

    for rel, is_dir in actions:
        try:
            if _rmdir_if_empty(wt, rel, step) if is_dir else _remove_file(wt, rel, step):
                done.add(rel)
        except (PathRefused, OSError) as e:
            skipped[rel] = _why(e)
    for rel, want in sorted(writes.items()):
        try:
            st = wt.lstat(rel)
            if st is not None and stat.S_ISDIR(st.st_mode):
                skipped[rel] = "a directory holding other files is in the way"
                continue
            step()
            wt.set_state(rel, str(want.id), want.filemode, tag)
            done.add(rel)
        except (PathRefused, OSError) as err:
            skipped[rel] = _why(err)
    wanted = set(paths)
    return Restored(tuple(sorted(p for p in done if p in wanted)),
                    tuple(sorted((p, w) for p, w in skipped.items() if p in wanted)))


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _remove_file(wt: Worktree, rel: str, step: Callable[[], None]) -> bool:
    """Unlink a non-directory at ``rel`` (a symlink itself); False when none."""
    try:
        with wt.parent_dir(rel, lenient=True) as (dir_fd, name):
            st = lstat_at(dir_fd, name)
            if st is None or stat.S_ISDIR(st.st_mode):
                return False
            step()
            unlink_at(dir_fd, name)
            return True
    except NoParent:
        return False


def _rmdir_if_empty(wt: Worktree, rel: str, step: Callable[[], None]) -> bool:
    """Remove the directory at ``rel`` if it is one and is empty."""
    try:
        with wt.parent_dir(rel, lenient=True) as (dir_fd, name):
            st = lstat_at(dir_fd, name)
            if st is None or not stat.S_ISDIR(st.st_mode):
                return False
            sub = open_dir_at(dir_fd, name)
            try:
                if os.listdir(sub):
                    return False
            finally:
                os.close(sub)
            step()
            rmdir_at(dir_fd, name)
            return True
    except NoParent:
        return False


def _why(e: Exception) -> str:
    if isinstance(e, WalError):
        return e.message
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e)
