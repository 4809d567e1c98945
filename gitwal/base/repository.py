"""Opening the repository git would use from a directory, by git's own rules.

``GIT_DIR`` names the git directory (relative paths from the start directory,
as git reads them after ``-C``); without it the git directory is discovered
upwards from the start directory, following a ``.git`` file (``git init
--separate-git-dir``, submodules, linked worktrees). The working tree is
``GIT_WORK_TREE`` if set, else ``core.worktree``, else: with ``GIT_DIR``, the
start directory (git takes the current directory as the top); without it, the
directory holding the ``.git`` entry. libgit2 applies the last three rules
when it opens the start directory; ``GIT_DIR`` and ``GIT_WORK_TREE`` are
applied here, and no other variable (``GIT_NAMESPACE`` would move the logs).

Costs one libgit2 open (~0.1 ms), no process.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pygit2
from pygit2.enums import RepositoryOpenFlag

from .errors import NotARepository


def open_repository(start: str | os.PathLike[str] = ".", hint: str = "") -> pygit2.Repository:
    """The repository for ``start`` (bare ones too: ``workdir`` is then None)."""
    base = os.path.abspath(start)
    env_dir = os.environ.get("GIT_DIR")
    env_tree = os.environ.get("GIT_WORK_TREE")
    try:
        if env_dir:
            repo = pygit2.Repository(os.path.join(base, env_dir),
                                     flags=RepositoryOpenFlag.NO_SEARCH)
        else:
            repo = pygit2.Repository(base)
    except pygit2.GitError:
        raise NotARepository(
            f"not a git repository: {Path(base).resolve()}"
            + (f" (GIT_DIR={env_dir})" if env_dir else ""),
            hint or "run this inside a git working tree (or `git init` one first)",
        ) from None
    if env_tree:
        repo.workdir = os.path.join(base, env_tree)
    elif env_dir and not repo.is_bare and "core.worktree" not in repo.config:
        repo.workdir = base
    return repo


def common_dir(repo: pygit2.Repository) -> Path:
    """The git dir shared by all worktrees (refs and objects live there)."""
    return _common_dir(repo.path)


@functools.lru_cache(maxsize=64)
def _common_dir(path: str) -> Path:
    # A git dir's commondir never changes while it exists: asked at every
    # step for every other run, it is worked out once per process.
    gitdir = Path(path)
    common = gitdir / "commondir"
    if common.exists():
        return (gitdir / common.read_text().strip()).resolve()
    return gitdir


def worktree_name(repo: pygit2.Repository) -> str:
    """This worktree's stable identity: its name under ``<common>/worktrees/``,
    or "" for the main worktree (no linked worktree can be named "")."""
    return _worktree_name(repo.path)


@functools.lru_cache(maxsize=64)
def _worktree_name(path: str) -> str:
    gitdir = Path(path).resolve()
    if gitdir == _common_dir(path).resolve():
        return ""
    return gitdir.name


def wal_dir(repo: pygit2.Repository) -> Path:
    """gitwal's private directory inside this worktree's git dir (``current``)."""
    return Path(repo.path) / "wal"


# Pack data libgit2 keeps mapped at once, in windows of WINDOW_BYTES. Mapped
# pages a read touched count in the process's memory: reading a 70,000-record
# log peaked at 67 MB with 32 MiB in 8 MiB windows, 49 MB with 8 MiB in 1 MiB
# windows, no slower (docs/performance.md).
MAPPED_BYTES = 8 << 20
WINDOW_BYTES = 1 << 20
OPEN_PACKS = 128  # pack files open at once


def bound_memory() -> None:
    """Make a gitwal process's memory flat in the log's length (the CLI, the
    hook server; a harness that imports gitwal keeps its own settings).

    libgit2's object cache (256 MiB by default) keeps every commit and tree
    read, and it maps packs in windows of up to 1 GiB, 8 GiB in all: reading
    a 100,000-record log would hold it all. gitwal reads each object once per
    command (the hook server keeps its own caches of decoded records), so the
    cache is off and at most :data:`MAPPED_BYTES` of packs stay mapped."""
    pygit2.settings.enable_caching(False)
    pygit2.settings.mwindow_size = WINDOW_BYTES
    pygit2.settings.mwindow_mapped_limit = MAPPED_BYTES
    # Packs open at once (libgit2's default: no limit); the least recently
    # used is closed first. gitwal keeps few packs (tiered merges).
    pygit2.settings.mwindow_file_limit = OPEN_PACKS
