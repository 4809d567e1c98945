"""gitwal's git hooks beside the hook managers teams use: the real husky and
lefthook from the npm registry, the pre-commit framework's layout, and a
tracked core.hooksPath directory. gitwal never writes into a manager's
directory or a tracked file; it prints the entry to add, and `hooks status`
tells what runs each hook."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import GIT_WAL, git, init_repo, ok, wal

ROOT = Path(__file__).resolve().parents[1]

HUSKY, LEFTHOOK = "9.1.7", "2.2.2"  # pinned, from the npm registry
CACHE = ROOT / ".cache" / "hook-managers" / f"husky-{HUSKY}-lefthook-{LEFTHOOK}"
PATH = f"{Path(GIT_WAL).parent}:/usr/bin:/bin"  # gitwal (the venv), sh, git


@pytest.fixture(scope="module")
def tools() -> Path:
    """node_modules/.bin with the pinned husky and lefthook (installed once,
    under a lock: test processes run in parallel)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the hook-manager tests need husky and lefthook")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        bins = CACHE / "node_modules" / ".bin"
        if not (bins / "husky").exists() or not (bins / "lefthook").exists():
            (CACHE / "package.json").write_text('{"private": true}\n')
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent",
                            f"husky@{HUSKY}", f"lefthook@{LEFTHOOK}"],
                           cwd=CACHE, check=True, capture_output=True, timeout=600)
    return bins


def sh(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PATH": PATH})


def tree_state(repo: Path) -> str:
    """Tracked changes and untracked files (ignored ones excluded)."""
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def open_intent(repo: Path) -> str:
    run = ok(repo, "begin").strip()
    killed = wal(repo, "apply", "ensure-line", "README", "x",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL
    return run


def status(repo: Path) -> dict[str, dict[str, str | None]]:
    out = wal(repo, "hooks", "status", "--json")
    return {h["hook"]: h for h in json.loads(out.stdout)}


def test_husky_keeps_its_hooks_and_runs_gitwals_from_its_own_file(
        tmp_path: Path, tools: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    assert sh(repo, str(tools / "husky")).returncode == 0  # core.hooksPath=.husky/_
    user = repo / ".husky" / "pre-commit"
    user.write_text('echo ran >> "$(git rev-parse --git-dir)/user-hook-ran"\n')
    git(repo, "add", ".husky/pre-commit")
    git(repo, "commit", "-qm", "husky")
    generated = sorted(p.name for p in (repo / ".husky" / "_").iterdir())
    before = tree_state(repo)

    out = ok(repo, "hooks", "install")
    assert "pre-commit: run by husky; gitwal wrote nothing. Add to .husky/pre-commit:" in out
    assert 'git wal hooks run pre-commit "$@"' in out
    assert "reference-transaction: unavailable: husky owns core.hooksPath" in out
    # Nothing written: not the generated directory, not the tracked hook.
    assert sorted(p.name for p in (repo / ".husky" / "_").iterdir()) == generated
    assert tree_state(repo) == before
    assert status(repo)["pre-commit"]["action"] == "add-to-manager"
    assert wal(repo, "hooks", "status").returncode == 1
    # The user's husky hook still runs: gitwal renamed nothing.
    (repo / ".git" / "user-hook-ran").unlink()
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    assert sh(repo, "git", "commit", "-qm", "a").returncode == 0
    assert (repo / ".git" / "user-hook-ran").read_text() == "ran\n"

    with user.open("a") as f:
        f.write('git wal hooks run pre-commit "$@"\n')
    git(repo, "commit", "-qam", "gitwal in husky")
    assert status(repo)["pre-commit"]["action"] == "via-manager"
    assert wal(repo, "hooks", "status").returncode == 0
    assert sh(repo, str(tools / "husky")).returncode == 0  # husky re-run: nothing lost
    run = open_intent(repo)
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    refused = sh(repo, "git", "commit", "-qm", "half-applied")
    assert refused.returncode != 0 and f"git wal recover --run {run}" in refused.stderr
    ok(repo, "recover")
    assert sh(repo, "git", "commit", "-qm", "fine now").returncode == 0


def test_lefthook_runs_gitwals_hooks_from_its_config_and_renames_nothing_of_ours(
        tmp_path: Path, tools: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "lefthook.yml").write_text(
        "pre-commit:\n  commands:\n    user:\n"
        '      run: echo ran >> "$(git rev-parse --git-dir)/user-hook-ran"\n')
    git(repo, "add", "lefthook.yml")
    git(repo, "commit", "-qm", "lefthook")
    assert sh(repo, str(tools / "lefthook"), "install").returncode == 0
    hooks = repo / ".git" / "hooks"
    lefthooks = (hooks / "pre-commit").read_bytes()

    out = ok(repo, "hooks", "install")
    assert "pre-commit: run by lefthook; gitwal wrote nothing. Add to lefthook.yml:" in out
    assert "reference-transaction: installed" in out  # lefthook does not run that one
    assert (hooks / "pre-commit").read_bytes() == lefthooks
    assert not (hooks / "pre-commit.gitwal-chained").exists()

    with (repo / "lefthook.yml").open("a") as f:
        # The entry's command under the existing `pre-commit: commands:`.
        entry = status(repo)["pre-commit"]["entry"]
        assert entry is not None
        f.write(entry.replace("pre-commit:\n  commands:\n", "") + "\n")
    git(repo, "commit", "-qam", "gitwal in lefthook")
    assert sh(repo, str(tools / "lefthook"), "install").returncode == 0
    states = status(repo)
    assert states["pre-commit"]["action"] == "via-manager"
    assert states["reference-transaction"]["action"] == "installed"
    # lefthook re-installed: gitwal's reference-transaction is still in place.
    refused = sh(repo, "git", "update-ref", "-d", f"refs/wal/{open_intent(repo)}")
    assert refused.returncode != 0 and "refusing to delete" in refused.stderr
    (repo / "c.txt").write_text("c\n")
    git(repo, "add", "c.txt")
    blocked = sh(repo, "git", "commit", "-qm", "half-applied")
    assert blocked.returncode != 0 and "git wal recover --run" in blocked.stderr


def test_a_lefthook_that_took_gitwals_place_is_reported_as_overwritten(
        tmp_path: Path, tools: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    ok(repo, "hooks", "install")  # gitwal first
    (repo / "lefthook.yml").write_text("pre-commit:\n  commands:\n    user:\n      run: 'true'\n")
    assert sh(repo, str(tools / "lefthook"), "install").returncode == 0
    assert (repo / ".git" / "hooks" / "pre-commit.old").exists()  # lefthook moved ours
    state = status(repo)["pre-commit"]
    assert state["action"] == "overwritten" and "pre-commit.old" in str(state["why"])
    assert wal(repo, "hooks", "status").returncode == 1


def test_a_tracked_hooks_path_is_never_written(repo: Path) -> None:
    shared = repo / ".githooks"
    shared.mkdir()
    (shared / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (shared / "pre-commit").chmod(0o755)
    git(repo, "add", ".githooks")
    git(repo, "commit", "-qm", "shared hooks")
    git(repo, "config", "core.hooksPath", ".githooks")
    before = tree_state(repo)
    out = ok(repo, "hooks", "install")
    assert "pre-commit: run by tracked-hooks-path; gitwal wrote nothing. Add to " \
           ".githooks/pre-commit:" in out
    assert "Add to .githooks/reference-transaction:" in out
    assert tree_state(repo) == before
    assert sorted(p.name for p in shared.iterdir()) == ["pre-commit"]


def test_the_pre_commit_framework_keeps_its_hook_and_gitwal_keeps_reference_transaction(
        repo: Path) -> None:
    (repo / ".pre-commit-config.yaml").write_text("repos: []\n")
    hooks = repo / ".git" / "hooks"
    # The script `pre-commit install` writes (its marker line), without the framework.
    framework = "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n"
    (hooks / "pre-commit").write_text(framework)
    out = ok(repo, "hooks", "install")
    assert "pre-commit: run by pre-commit; gitwal wrote nothing. Add to " \
           ".pre-commit-config.yaml:" in out and "entry: git wal hooks run pre-commit" in out
    assert "reference-transaction: installed" in out
    assert (hooks / "pre-commit").read_text() == framework


def test_hooks_run_passes_arguments_and_stdin_through(repo: Path) -> None:
    run = open_intent(repo)
    refused = wal(repo, "hooks", "run", "pre-commit")
    assert refused.returncode == 1 and f"git wal recover --run {run}" in refused.stderr
    ok(repo, "recover")
    head = git(repo, "rev-parse", f"refs/wal/{run}").strip()
    deletion = f"{head} {'0' * 40} refs/wal/{run}\n"
    blocked = wal(repo, "hooks", "run", "reference-transaction", "prepared",
                  input=deletion.encode())
    assert blocked.returncode == 1 and "refusing to delete" in blocked.stderr
    fine = wal(repo, "hooks", "run", "reference-transaction", "prepared",
               input=f"{'0' * 40} {head} refs/heads/x\n".encode())
    assert fine.returncode == 0
