"""Repositories and logs the benchmarks run on.

* :func:`init_repo`: a git repository with one base commit of the given files.
* :func:`generate_tree`: ``n`` small files in a nested layout, like a source tree.
* :func:`build_run`: a long run of ``write_file`` steps written straight into
  the object database with pygit2, following docs/format.md (the same objects
  ``Run.apply`` writes: per step a post-image blob, an intent blob, its tree
  and commit, then a commit-record blob, its tree and commit), with libgit2's
  fsync switched off for the build only. The objects are loose, as gitwal
  leaves them.
* :func:`build_run_packed`: the same records and trees, streamed through
  ``git fast-import`` into one pack. Loose objects cost libgit2 several file
  system calls each; 100k records (350k objects) that way take minutes, and a
  log that long would have been packed by ``git gc --auto`` long before anyway.

Building through ``Store.append`` with fsync on would take far longer; what is
measured on these runs (reading, recovery, size) does not depend on how the
bytes got there.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pygit2

from gitwal.ids import Lsn, RunId
from gitwal.log.appends import REF_PREFIX
from gitwal.records.codec import encode
from gitwal.records.model import REPLAY_SAFE, Commit, Intent, Plan, Record, summary
from gitwal.worktree.tree import MODE_FILE

from .common import sh

SIGNATURE = pygit2.Signature("gitwal", "gitwal@localhost")
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


def step_content(path: str, k: int) -> bytes:
    return f"{path} version {k}\n".encode()


def run_records(
    run: str, base: str, steps: int, current: dict[str, str]
) -> Iterator[tuple[Record, bytes | None, list[str]]]:
    """The appends of a run: (record, new post-image bytes or None, object ids it names).

    ``current`` maps each path to its blob id in ``base``; it ends at the last post.
    """
    rid = RunId(run)
    paths = list(current)
    yield Plan(rid, Lsn(1), f"bench run of {steps} steps", base, "main", ()), None, []
    lsn = 2
    for k in range(steps):
        path = paths[k % len(paths)]
        data = step_content(path, k)
        post = str(pygit2.hash(data))
        pre = current[path]
        yield Intent(
            run=rid, lsn=Lsn(lsn), tool="write_file", args={"path": path, "content": post},
            target=(path,), pre=(pre,), post=(post,), mode=(MODE_FILE,),
            replay=REPLAY_SAFE, key=f"{rid}:{lsn}",
        ), data, sorted({pre, post})
        yield Commit(rid, Lsn(lsn + 1), Lsn(lsn), (post,), "hash==post"), None, []
        current[path] = post
        lsn += 2


def build_run(repo_root: Path, run: str, steps: int, paths: list[str]) -> int:
    """Append a plan and ``steps`` committed write_file steps to ``refs/wal/<run>``.

    Loose objects through libgit2 (fsync off). ``paths`` must exist in HEAD;
    they are rewritten in turn, and the working tree is left at the last
    committed content, so recovery finds no drift. Returns the record count.
    """
    repo = pygit2.Repository(str(repo_root))
    head_tree = repo.head.peel(pygit2.Commit).tree
    current = {p: str(head_tree[p].id) for p in paths}
    head: pygit2.Oid | None = None
    with fsync_off():
        for rec, data, refs in run_records(run, str(repo.head.target), steps, current):
            if data is not None:
                repo.create_blob(data)
            tb = repo.TreeBuilder()
            tb.insert(f"{rec.lsn:012d}.json", repo.create_blob(encode(rec)),
                      pygit2.GIT_FILEMODE_BLOB)
            for oid in refs:
                tb.insert(f"obj-{oid}", pygit2.Oid(hex=oid), pygit2.GIT_FILEMODE_BLOB)
            head = repo.create_commit(None, SIGNATURE, SIGNATURE, summary(rec) + "\n",
                                      tb.write(), [head] if head is not None else [])
        assert head is not None
        repo.references.create(REF_PREFIX + run, head)
    return finish_tree(repo_root, paths, steps)


def build_run_packed(repo_root: Path, run: str, steps: int, paths: list[str]) -> int:
    """:func:`build_run`, streamed through ``git fast-import`` into one pack."""
    repo = pygit2.Repository(str(repo_root))
    head_tree = repo.head.peel(pygit2.Commit).tree
    current = {p: str(head_tree[p].id) for p in paths}
    proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=repo_root,
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000

    def data(payload: bytes) -> None:
        out.write(b"data %d\n" % len(payload) + payload + b"\n")

    for rec, post, refs in run_records(run, str(repo.head.target), steps, current):
        post_id = None if post is None else str(pygit2.hash(post))
        when += 1
        out.write(f"commit {REF_PREFIX}{run}\n".encode())
        out.write(f"committer {SIGNATURE.name} <{SIGNATURE.email}> {when} +0000\n".encode())
        data((summary(rec) + "\n").encode())
        out.write(b"deleteall\n")
        out.write(f"M 100644 inline {rec.lsn:012d}.json\n".encode())
        data(encode(rec))
        for oid in refs:
            if post is not None and oid == post_id:
                out.write(f"M 100644 inline obj-{oid}\n".encode())
                data(post)
            else:
                out.write(f"M 100644 {oid} obj-{oid}\n".encode())
    out.write(b"done\n")
    out.close()
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.wait() != 0:
        raise RuntimeError(f"git fast-import failed: {err.strip()}")
    return finish_tree(repo_root, paths, steps)


def finish_tree(repo_root: Path, paths: list[str], steps: int) -> int:
    """Leave each path at its last committed content; returns the record count."""
    for i, path in enumerate(paths):
        mine = range(i, steps, len(paths))  # the steps that wrote this path
        if mine:
            (repo_root / path).write_bytes(step_content(path, mine[-1]))
    os.sync()  # setup done: settle the page cache before anything is timed
    return 1 + 2 * steps
