"""Whole-tree snapshots (`exec` pre/post trees): the run's scratch index.

It is a split index kept in `.git/wal/index/<run>`; the user's index is
never touched, and a scratch index that a crash damaged (torn, or its
shared part gone) is only a lost cache: the next snapshot rebuilds it and
still gives the exact tree.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest

from gitwal.worktree.byname import Synced, fsync_names
from gitwal.worktree.tree import Worktree

from .conftest import GIT_WAL, git, ok, tree_of

RUN = "snap"


def snapshot(repo: Path) -> str:
    return str(Worktree(pygit2.Repository(str(repo))).snapshot(RUN))


def shared_parts(repo: Path) -> list[Path]:
    return sorted((repo / ".git").glob("sharedindex.*"))


def test_a_snapshot_is_the_whole_tree_and_leaves_the_users_index_alone(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "a.txt").write_text("a\n")  # untracked: in the snapshot
    (repo / "README").write_text("changed\n")  # modified, not staged
    user_index = (repo / ".git" / "index").read_bytes()
    tree = snapshot(repo)
    assert tree == tree_of(repo)
    assert (repo / ".git" / "index").read_bytes() == user_index
    assert git(repo, "status", "--porcelain").splitlines() == [" M README", "?? src/"]
    # The scratch index is a split index: its shared part lives in the git dir.
    assert (repo / ".git" / "wal" / "index" / RUN).is_file()
    assert len(shared_parts(repo)) == 1


@pytest.mark.parametrize("damage", ["shared-part-gone", "torn", "empty"])
def test_a_damaged_scratch_index_is_rebuilt(repo: Path, damage: str) -> None:
    snapshot(repo)
    index = repo / ".git" / "wal" / "index" / RUN
    if damage == "shared-part-gone":
        for part in shared_parts(repo):
            part.unlink()
    elif damage == "torn":
        index.write_bytes(index.read_bytes()[: len(index.read_bytes()) // 2])
    else:
        index.write_bytes(b"")
    (repo / "new.txt").write_text("new\n")
    assert snapshot(repo) == tree_of(repo)
    (repo / "README").unlink()
    assert snapshot(repo) == tree_of(repo)  # and the rebuilt index works on


# -- durable by name: what a snapshot took in is fsynced path by path ---------------


def test_fsync_names_fsyncs_each_path_and_its_directories_never_through_a_link(
        tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("f\n")
    (root / "top.txt").write_text("t\n")
    outside.mkdir()
    (outside / "secret.txt").write_text("s\n")
    (root / "link").symlink_to(outside)
    (root / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(root / "fifo")  # opened non-blocking, never fsynced as a file
    got = fsync_names(root, ["a/b/f.txt", "top.txt", "gone/x.txt", "link/secret.txt",
                             "fifo", "../escape", "a/b/missing.txt"])
    # files: f.txt and top.txt; directories: a/b, a, the root (gone/ and link/
    # are not opened: one is missing, the other a symlink, never followed)
    assert got == Synced(files=2, dirs=3)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (make tools)")
def test_a_shell_step_fsyncs_what_its_command_changed_by_name_before_its_commit(
        repo: Path, tmp_path: Path) -> None:
    """syncfs is no barrier on a FUSE mount: every path the command changed, the
    directories whose entries it changed, and the objects' directories are
    fsynced by name, before the closing record's pack is written."""
    (repo / "gone.txt").write_text("bye\n")
    git(repo, "add", "gone.txt")
    git(repo, "commit", "-q", "-m", "gone")
    ok(repo, "begin", "--task", "by name", "--run", RUN)
    trace = tmp_path / "trace"
    cmd = "mkdir -p d/e && echo hi > d/e/new.txt && rm gone.txt && echo more >> README"
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,renameat,"
                           "rename,renameat2", "-o", str(trace), GIT_WAL, "exec", "--", "sh",
                           "-c", cmd], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = trace.read_text().splitlines()
    # the last pack renamed into objects/pack is the closing append's
    last_pack = max(i for i, line in enumerate(lines)
                    if re.search(r"rename.*objects/pack/pack-[0-9a-f]+\.idx", line))
    before = {m.group(1) for line in lines[:last_pack]
              if (m := re.search(r"\bf(?:data)?sync\(\d+<([^>]*)>\)\s+= 0", line))}
    root = str(repo.resolve())
    new_blob = git(repo, "hash-object", "d/e/new.txt").strip()
    for want in (f"{root}/d/e/new.txt", f"{root}/README", f"{root}/d/e", f"{root}/d", root,
                 f"{root}/.git/objects/{new_blob[:2]}"):
        assert want in before, f"{want} not fsynced before the commit; fsynced:\n" + "\n".join(
            sorted(f for f in before if f.startswith(root) and "/.git/" not in f))
    log = ok(repo, "log", "--run", RUN)
    assert "committed" in log or "commit" in log, log
