"""Every push that moves a remote ref is a compare-and-swap (remote/cas_push.py):
checked against a real bare repository, not against the argument list alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitwal.remote.cas_push import LANDED, Update, porcelain, push_args


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def push(cwd: Path, updates: list[Update], atomic: bool = False) -> dict[str, str]:
    proc = subprocess.run(["git", *push_args("origin", updates, atomic=atomic)], cwd=cwd,
                          capture_output=True, text=True)
    return {ref: o.status for ref, o in porcelain(proc.stdout).items()}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, list[str]]:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", str(work))
    git(work, "remote", "add", "origin", str(server))
    commits = []
    for i in range(3):
        (work / "f").write_text(f"{i}\n")
        git(work, "add", "f")
        git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", str(i))
        commits.append(git(work, "rev-parse", "HEAD"))
    return work, commits


def test_a_forced_update_or_a_blind_deletion_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        Update("refs/wal/r", None, "")
    with pytest.raises(ValueError):
        Update("refs/wal/r", None, None)
    with pytest.raises(ValueError):
        Update("+refs/wal/r", "abc", None)
    args = push_args("origin", [Update("refs/wal/r", "abc", "def"), Update("refs/x", "1", None)],
                     atomic=True)
    assert not any(a.startswith("+") for a in args) and "--force-with-lease" not in args
    assert "--atomic" in args and "--force-with-lease=refs/wal/r:def" in args


def test_the_remote_ref_moves_only_from_the_value_named(pair: tuple[Path, list[str]]) -> None:
    work, (c0, c1, c2) = pair
    ref = "refs/wal/r"
    assert push(work, [Update(ref, c0, "")])[ref] in LANDED
    # "must not exist" loses once it does; a stale expected value loses too.
    assert push(work, [Update(ref, c1, "")])[ref] == "rejected"
    assert push(work, [Update(ref, c2, c1)])[ref] == "rejected"
    assert git(work, "ls-remote", "origin", ref).split()[0] == c0
    # Not a fast-forward, yet named exactly: a compare-and-swap git lets through.
    assert push(work, [Update(ref, c1, c0)])[ref] in LANDED
    assert push(work, [Update(ref, c0, c1)])[ref] == "compacted"  # git's "+": not a fast-forward
    # No expected value: only a fast-forward goes.
    assert push(work, [Update(ref, c2, None)])[ref] in LANDED
    assert push(work, [Update(ref, c0, None)])[ref] == "rejected"
    # A deletion from a stale value keeps the ref; from the right one, deletes it.
    assert push(work, [Update(ref, None, c1)])[ref] == "rejected"
    assert push(work, [Update(ref, None, c2)])[ref] == "deleted"
    assert git(work, "ls-remote", "origin", ref) == ""


def test_an_atomic_push_takes_all_or_none(pair: tuple[Path, list[str]]) -> None:
    work, (c0, c1, _c2) = pair
    assert push(work, [Update("refs/wal/a", c0, "")])["refs/wal/a"] in LANDED
    out = push(work, [Update("refs/wal/b", c1, ""), Update("refs/wal/a", c1, "")], atomic=True)
    assert out["refs/wal/a"] == "rejected"
    assert git(work, "ls-remote", "origin", "refs/wal/b") == ""
