"""Restores whose paths change kind: a file where a directory was, or the reverse.

An undo or redo (and recovery finishing or taking one back) gives each of its
paths a state: a blob, or absent. When one of them becomes absent and is a
file standing where another needs a directory (``rm -r d; echo D > d``
undone), or a directory stands where one of them must become a file (the
same step redone), order matters: the removals in the way go first, deepest
first, then the writes, shallowest first, then the other removals.

As for git, a directory at a path counts as that path's file being absent.
A directory is removed only where a file must go, and only once the
restore's own removals have emptied it (what is left then is empty
directories, which hold no bytes). :func:`blocked` checks before anything is
logged that the tree can take the whole restore that way: a file, a link or
a directory holding someone else's files in the way refuses it up front
(the first law: gitwal never removes bytes it did not write).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Sequence

from ..base.durable_at import open_dir_at, rmdir_at
from ..base.errors import PathRefused
from ..base.ids import ABSENT
from .confine import NoParent, lstat_at
from .overwrite import DIRECTORY, found
from .tree import Worktree

__all__ = ["blocked", "clear", "file_state", "is_dir", "order"]


def _ancestors(rel: str) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b"]`` (shallowest first)."""
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _depth(rel: str) -> int:
    return rel.count("/")


def order(paths: Sequence[str], goals: Sequence[str]) -> list[int]:
    """The indices of ``paths`` in the order to give each its goal state:
    removals in the way of a write first (a file where a write needs a
    directory, or a file inside a directory a write replaces), deepest first;
    then the writes, shallowest first; then every other removal, in order
    (after the writes: a moved file is never nowhere in the tree)."""
    writes = {p for p, g in zip(paths, goals, strict=True) if g != ABSENT}
    over = {a for w in writes for a in _ancestors(w)}  # directories the writes need

    def in_way(p: str) -> bool:
        return p in over or any(a in writes for a in _ancestors(p))

    removals = [i for i, g in enumerate(goals) if g == ABSENT]
    first = sorted((i for i in removals if in_way(paths[i])),
                   key=lambda i: (-_depth(paths[i]), paths[i]))
    made = sorted((i for i, g in enumerate(goals) if g != ABSENT),
                  key=lambda i: (_depth(paths[i]), paths[i]))
    taken = set(first)
    return first + made + [i for i in removals if i not in taken]


def is_dir(wt: Worktree, rel: str) -> bool:
    """True when a real directory (not a link to one) stands at ``rel``."""
    try:
        st = wt.lstat(rel)
    except PathRefused:
        return False
    return st is not None and stat.S_ISDIR(st.st_mode)


def _kind(st: os.stat_result) -> str:
    if stat.S_ISREG(st.st_mode):
        return "a file"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return "not a regular file"


def blocked(wt: Worktree, paths: Sequence[str], goals: Sequence[str],
            tool: str) -> list[tuple[str, str, str]]:
    """(path, what is in the way, why) for each path the tree cannot take its
    goal at, read now,
    before anything is written: an ancestor of a write that is a file (or a
    link, or a special file) the restore does not remove itself, or a
    directory where a file must go that still holds something once the
    restore's own removals are done."""
    removed = {p for p, g in zip(paths, goals, strict=True) if g == ABSENT}
    kinds: dict[str, str] = {}  # ancestor -> "" (a directory), "absent" or its kind
    out: list[tuple[str, str, str]] = []
    for path, goal in zip(paths, goals, strict=True):
        if goal == ABSENT:
            continue
        for a in _ancestors(path):
            if a not in kinds:
                try:
                    st = wt.lstat(a)
                except PathRefused as e:
                    out.append((path, a, e.message))
                    break
                kinds[a] = ("absent" if st is None else
                            "" if stat.S_ISDIR(st.st_mode) else _kind(st))
            if kinds[a] == "absent":
                break  # made by the write, with everything below it
            if kinds[a]:
                if a not in removed:
                    out.append((path, a, f"{a} is {kinds[a]} now, where {tool} needs "
                                         "a directory"))
                break
        else:
            if is_dir(wt, path) and (left := _left_in(wt, path, removed)):
                out.append((path, left, f"{path} is a directory holding {left}, which "
                                        f"{tool} does not remove"))
    return out


def _left_in(wt: Worktree, rel: str, removed: Collection[str]) -> str:
    """The first entry under the directory ``rel`` that is neither a
    directory nor one of ``removed`` ("" when none): what would still be
    there once those are gone. Stops at the first one found."""
    try:
        with wt.parent_dir(rel, lenient=True) as (dir_fd, name):
            fd = open_dir_at(dir_fd, name)
    except (NoParent, OSError):
        return ""
    try:
        return _left_at(fd, rel, removed)
    finally:
        os.close(fd)


def _left_at(fd: int, rel: str, removed: Collection[str]) -> str:
    for name in sorted(os.listdir(fd)):
        child = f"{rel}/{name}"
        st = lstat_at(fd, name)
        if st is None:
            continue
        if not stat.S_ISDIR(st.st_mode):
            if child not in removed:
                return child
            continue
        sub = open_dir_at(fd, name)
        try:
            if (left := _left_at(sub, child, removed)):
                return left
        finally:
            os.close(sub)
    return ""


def clear(wt: Worktree, rel: str) -> bool:
    """Remove the directory at ``rel`` when nothing but empty directories is
    left in it (deepest first); False, and everything left as found, when
    something else is there or ``rel`` is not a directory."""
    try:
        with wt.parent_dir(rel, lenient=True) as (dir_fd, name):
            st = lstat_at(dir_fd, name)
            if st is None or not stat.S_ISDIR(st.st_mode):
                return False
            fd = open_dir_at(dir_fd, name)
            try:
                if _left_at(fd, rel, ()):
                    return False
                _empty(fd)
            finally:
                os.close(fd)
            rmdir_at(dir_fd, name)
            return True
    except (NoParent, OSError):
        return False


def _empty(fd: int) -> None:
    """Remove every (empty) directory inside ``fd``, deepest first."""
    for name in os.listdir(fd):
        sub = open_dir_at(fd, name)
        try:
            _empty(sub)
        finally:
            os.close(sub)
        rmdir_at(fd, name)


def file_state(wt: Worktree, rel: str) -> str:
    """What ``rel`` holds as a file: :func:`found`'s answer, with a directory
    counted as the file being absent (as git counts it)."""
    now = found(wt, rel)
    return ABSENT if now == DIRECTORY else now
