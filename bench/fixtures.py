"""Repositories and logs the benchmarks run on.

* :func:`init_repo`: a git repository with one base commit of the given files.
* :func:`generate_tree`: ``n`` small files in a nested layout, like a source tree.
* :func:`fsync_off`: libgit2 without fsync, for a diagnostic.

Long runs are grown through gitwal's own writer instead (bench/logbuild.py):
a log as gitwal writes it, not one built beside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pygit2

from .common import sh

FILES_PER_DIR = 50
DIRS_PER_DIR = 20


def init_repo(root: Path, files: Mapping[str, bytes] | None = None) -> Path:
    """``git init`` + one commit holding ``files`` (and whatever is already in ``root``)."""
    root.mkdir(parents=True, exist_ok=True)
    sh("git", "init", "-q", "-b", "main", str(root))
    for rel, data in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    sh("git", "add", "-A", cwd=root)
    when = "2026-01-01T00:00:00Z"  # same files, same commit id: runs built on it compare
    sh("git", "commit", "-q", "--allow-empty", "-m", "base", cwd=root,
       env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
    return root


def tree_paths(n: int) -> Iterator[str]:
    """``n`` paths: 50 files per leaf directory, leaves 20 to a parent, 3 levels."""
    for i in range(n):
        leaf = i // FILES_PER_DIR
        mid, low = divmod(leaf, DIRS_PER_DIR)
        top, mid = divmod(mid, DIRS_PER_DIR)
        yield f"pkg{top:02d}/mod{mid:02d}/part{low:02d}/file{i:05d}.txt"


def file_body(i: int) -> bytes:
    """About 200 bytes of distinct, text-like content."""
    line = f"def function_{i}(x):  # generated file {i}\n"
    return (line + f"    return x * {i} + {i % 7}\n" * 4).encode()


def generate_tree(root: Path, n: int) -> list[str]:
    """Write ``n`` files under ``root``; returns their relative paths."""
    made: set[Path] = set()
    paths = list(tree_paths(n))
    for i, rel in enumerate(paths):
        path = root / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_bytes(file_body(i))
    return paths


@contextmanager
def fsync_off() -> Iterator[None]:
    """libgit2 without fsync (setup only); gitwal's own setting is restored after."""
    pygit2.settings.enable_fsync_gitdir(False)
    try:
        yield
    finally:
        pygit2.settings.enable_fsync_gitdir(True)
