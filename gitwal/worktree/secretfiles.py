"""Untracked secret-looking files around a shell step. Snapshots leave them out
(secrets.py), so a failing step's rollback cannot see them in its trees:
their ids are held in memory from before the command to the closing, so the
step names each one the command changed and left, and a watched one
(``--watch``) has its bytes held too and is put back (docs/security.md
"Secrets"). Nothing of them enters the object database or the log: the
command's version of a watched file put back is kept as a private file
under ``.git/wal/kept/`` (mode 0600), never pushed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..base.durable import atomic_write, makedirs_durable
from ..base.errors import WalError
from ..base.ids import ABSENT
from . import secrets
from .tree import Worktree, blob_id

KEPT_DIR = "kept"


@dataclass(frozen=True)
class Before:
    """What each untracked secret-looking file held before the command."""

    ids: dict[str, str]  # path -> blob id (ABSENT: not there)
    # watched: the bytes and mode (None: not there)
    held: dict[str, tuple[bytes, int] | None] = field(default_factory=dict)


def _listed(wt: Worktree, args: Sequence[str]) -> list[str]:
    env = dict(os.environ, GIT_DIR=wt.repo.path, GIT_WORK_TREE=str(wt.root))
    env.pop("GIT_INDEX_FILE", None)
    proc = subprocess.run(["git", "ls-files", "-z", "--others", *args], cwd=wt.root,
                          env=env, capture_output=True)
    if proc.returncode != 0:
        return []
    return [os.fsdecode(p) for p in proc.stdout.split(b"\0") if p]


def _read(wt: Worktree, rel: str) -> tuple[bytes, int] | None:
    try:
        data, mode = wt.read(rel)
    except (OSError, WalError):  # a directory, a special file, a refused path
        return None
    return None if data is None else (data, mode)


def _id(got: tuple[bytes, int] | None) -> str:
    return ABSENT if got is None else blob_id(got[0])


def before(wt: Worktree, watched: Sequence[str]) -> Before:
    """The untracked secret-looking files a snapshot would have taken but for
    their names (not ignored by the repository), and those under ``watched``."""
    match = secrets.matcher(secrets.patterns(wt.repo))
    found = {p for p in _listed(wt, ["--exclude-standard"]) if match(p)}
    watched_found = {p for p in _listed(wt, ["--", *watched]) if match(p)} if watched else set()
    ids: dict[str, str] = {}
    held: dict[str, tuple[bytes, int] | None] = {}
    for rel in sorted(found | watched_found):
        got = _read(wt, rel)
        ids[rel] = _id(got)
        if rel in watched_found:
            held[rel] = got
    for w in watched:  # a watched secret the command may create
        if w not in ids and match(w) and not secrets.tracked(wt.root, [w], wt.repo.path):
            ids[w] = ABSENT
            held[w] = None
    return Before(ids, held)


def changed(wt: Worktree, state: Before) -> list[str]:
    """The paths of ``state`` whose content the command changed (created ones
    under a watched path included)."""
    out = []
    for rel, was in state.ids.items():
        if _id(_read(wt, rel)) != was:
            out.append(rel)
    return out


def plan_rollback(wt: Worktree, state: Before | None) -> tuple[list[str], str]:
    """After a failing command: the watched paths it changed (to put back)
    and the note naming those it changed and that stay as it left them."""
    if state is None:
        return [], ""
    unseen = changed(wt, state)
    back = [p for p in unseen if p in state.held]
    left = [p for p in unseen if p not in state.held]
    note = (f"; left as the command left them (secret-looking, never snapshotted; "
            f"--watch PATH puts one back): {', '.join(left)}" if left else "")
    return back, note


def rollback(wt: Worktree, state: Before | None, paths: Sequence[str], run: str,
             lsn: int) -> str:
    """Put the watched ``paths`` back from memory, the command's version kept
    first under ``.git/wal/kept/<run>.<lsn>/``; what to tell the user."""
    out = ""
    for rel in paths:
        if state is None or rel not in state.held:
            continue
        now = _read(wt, rel)
        kept = ""
        if now is not None:
            dest = Path(wt.repo.path) / "wal" / KEPT_DIR / f"{run}.{lsn}" / rel
            if not dest.parent.is_dir():
                makedirs_durable(dest.parent)
            atomic_write(dest, now[0], 0o600, "sx")
            kept = f"; the command's version is kept in {dest}"
        pre = state.held[rel]
        try:
            if pre is None:
                wt.remove(rel)
            else:
                wt.write(rel, pre[0], pre[1], f"r{lsn}")
        except (OSError, WalError) as e:
            out += f"; could not put back {rel} ({e}){kept}"
            continue
        out += f"; restored {rel} (watched, secret-looking){kept}"
    return out
