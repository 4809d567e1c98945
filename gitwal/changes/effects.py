"""Applying, checking and undoing one step's effect on the working tree.

Shared by the live step protocol (run.py) and by recovery, so that a redo
after a crash writes exactly what the first attempt would have written.
A step's commands (its check, an exec step's command) run in commands.py.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import pygit2

from ..base.crashpoints import crash_point
from ..base.errors import PathRefused
from ..base.ids import ABSENT
from ..records.model import Intent
from ..worktree import reshape
from ..worktree.overwrite import DIRECTORY, Kept, found, put, torn_prefix
from ..worktree.tree import Worktree
from . import tools


def apply_post(wt: Worktree, intent: Intent) -> tuple[Kept, ...]:
    """Write an intent's post-images: creations before deletions, so a crash
    between paths never leaves the content nowhere in the tree.

    A target is written only while it holds its recorded pre-image (or the
    post-image already): one that changed since the pre-image was read is
    someone else's; writing stops there and what was found is returned (the
    caller restores what was written and aborts)."""
    assert intent.post is not None
    modes = tools.post_modes(intent.tool, intent.mode, intent.args)
    if intent.tool in tools.RESTORING_TOOLS:
        pres = intent.pre
        _done, stopped = _in_order(wt, intent, intent.post, modes, f"w{intent.lsn}",
                                   "between-paths", lambda i, now: now == pres[i], stop=True)
        return tuple(stopped)
    order = sorted(range(len(intent.target)), key=lambda i: intent.post[i] == ABSENT)  # type: ignore[index]
    for n, i in enumerate(order):
        if n:
            crash_point("between-paths")
        kept = put(wt, intent.target[i], intent.post[i], modes[i], f"w{intent.lsn}",
                   ours=(intent.pre[i],))
        if kept is not None:
            return (kept,)
        if intent.tool in tools.RESTORING_TOOLS:
            _fix_mode(wt, intent.target[i], intent.post[i], modes[i], f"w{intent.lsn}")
    return ()


def observed(wt: Worktree, intent: Intent) -> tuple[str, ...]:
    """What each target of a file intent holds now, to verify it against its
    post-images; for an undo or redo a directory counts as the file absent
    (reshape.file_state): one of its paths may need that directory."""
    if intent.tool in tools.RESTORING_TOOLS:
        return tuple(reshape.file_state(wt, p) for p in intent.target)
    return tuple(wt.state(p) for p in intent.target)


def _in_order(wt: Worktree, intent: Intent, goals: Sequence[str], modes: Sequence[int],
              tag: str, point: str, ours: Callable[[int, str], bool], stop: bool
              ) -> tuple[list[str], list[Kept]]:
    """Give an undo's or redo's targets their ``goals`` in reshape.order
    (removals in the way of a path changing kind first): each only while it
    holds ``goals`` already or a state ``ours`` says gitwal wrote. A
    directory where a file goes is removed once empty; one still holding
    something, or a file in the way of a write, is kept (``stop``: at the
    first one kept)."""
    done: list[str] = []
    kept: list[Kept] = []
    for n, i in enumerate(reshape.order(intent.target, goals)):
        if n:
            crash_point(point)
        rel, goal = intent.target[i], goals[i]
        now = reshape.file_state(wt, rel)
        if goal != ABSENT and reshape.is_dir(wt, rel) and not reshape.clear(wt, rel):
            kept.append(Kept(rel, DIRECTORY))
        elif now == goal:
            _fix_mode(wt, rel, goal, modes[i], tag)
            continue
        elif not ours(i, now):
            kept.append(Kept(rel, now))
        else:
            try:
                wt.set_state(rel, goal, modes[i], tag)
                _fix_mode(wt, rel, goal, modes[i], tag)
                done.append(rel)
                continue
            except PathRefused as e:  # a file or a link in the way since the plan
                kept.append(Kept(rel, now, e.message))
        if stop:
            break
    return done, kept


def _fix_mode(wt: Worktree, rel: str, state: str, mode: int, tag: str) -> None:
    """An undo or redo also puts back a mode (a shell step's chmod): states name
    contents only, so a path already holding the content may still need it."""
    if state == ABSENT:
        return
    _data, have = wt.read(rel)
    if have != mode:
        wt.set_state(rel, state, mode, tag)


@dataclass(frozen=True)
class Restore:
    """What putting a file intent's targets back to their pre-images did."""

    restored: tuple[str, ...]  # paths written back
    kept: tuple[Kept, ...]  # paths left alone: they held bytes gitwal did not write


def restore_pre(wt: Worktree, intent: Intent, also: Collection[str] = ()) -> Restore:
    """Put every target of a file intent that holds gitwal's own bytes (its
    post-image, or a torn prefix of it) back to its pre-image; ``also``: more
    states the caller made safe to overwrite (blobs it saved in the log)."""
    assert intent.post is not None
    if intent.tool in tools.RESTORING_TOOLS:
        posts = intent.post

        def ours(i: int, now: str) -> bool:
            return now == posts[i] or now in also or torn_prefix(
                wt.repo, wt, intent.target[i], posts[i], intent.pre[i])
        done_, kept_ = _in_order(wt, intent, intent.pre, intent.mode, f"r{intent.lsn}",
                                 "mid-restore", ours, stop=False)
        return Restore(tuple(done_), tuple(kept_))
    done: list[str] = []
    kept: list[Kept] = []
    for i, (path, pre, post, mode) in enumerate(
            zip(intent.target, intent.pre, intent.post, intent.mode, strict=True)):
        if i:
            crash_point("mid-restore")
        now = found(wt, path)
        if now == pre:
            continue
        if now == post or now in also or torn_prefix(wt.repo, wt, path, post, pre):
            wt.set_state(path, pre, mode, f"r{intent.lsn}")
            done.append(path)
        else:
            kept.append(Kept(path, now))
    return Restore(tuple(done), tuple(kept))


def missing_images(repo: pygit2.Repository, intent: Intent) -> list[str]:
    """Targets whose recorded pre-image is not a blob in the object database
    (pruned, or a forged id): such a target cannot be restored."""
    out = []
    for path, pre in zip(intent.target, intent.pre, strict=True):
        if pre != ABSENT and not isinstance(repo.get(pre), pygit2.Blob):
            out.append(path)
    return out
