"""Whole-tree snapshots (`exec` pre/post trees): the run's scratch index.

It is a split index kept in `.git/wal/index/<run>`; the user's index is
never touched, and a scratch index that a crash damaged (torn, or its
shared part gone) is only a lost cache: the next snapshot rebuilds it and
still gives the exact tree.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from gitwal.worktree.tree import Worktree

from .conftest import git, tree_of

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
