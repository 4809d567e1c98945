"""Shared fixtures: real git repositories in temp dirs, sealed from the
developer's own git config and home directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

GIT_WAL = str(Path(sys.executable).parent / "git-wal")


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(("GIT_", "GITWAL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.com")
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode()


def init_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    yield init_repo(tmp_path / "repo")


def wal(
    repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `git-wal` executable in ``repo``."""
    return subprocess.run(
        [GIT_WAL, *args], cwd=repo, input=input.decode() if input else None,
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )


def ok(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = wal(repo, *args, input=input)
    assert proc.returncode == 0, f"git wal {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def tree_of(repo: Path) -> str:
    """Tree id of the working tree (tracked + untracked, not ignored); no index touched."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "test-scratch.index")}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    out = subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def loose_object(repo: Path, oid: str) -> Path:
    """The path of ``oid`` as a loose object, every pack unpacked first.

    gitwal writes appends as kept packs; tests simulate a lost object by
    deleting it, which needs it loose."""
    packs = repo / ".git" / "objects" / "pack"
    for pack in sorted(packs.glob("pack-*.pack")):
        data = pack.read_bytes()
        for suffix in (".idx", ".pack", ".keep", ".rev", ".bitmap"):
            pack.with_suffix(suffix).unlink(missing_ok=True)
        subprocess.run(["git", "unpack-objects", "-q"], cwd=repo, input=data, check=True)
    return repo / ".git" / "objects" / oid[:2] / oid[2:]
