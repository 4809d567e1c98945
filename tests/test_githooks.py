"""gitwal's git hooks, exercised through real git commands."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from .conftest import git, init_repo, ok, wal

BARE_PATH = "/usr/bin:/bin"  # no virtualenv: the hooks must need only sh and git


def git_env(repo: Path, *args: str, path: str = BARE_PATH) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PATH": path})


def test_install_chains_user_hooks_is_idempotent_and_uninstall_restores(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    user = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/user-hook-ran\"\n"
    (hooks / "pre-commit").write_text(user)
    (hooks / "pre-commit").chmod(0o755)
    assert ok(repo, "hooks", "install").split() == [
        "pre-commit:", "chained", "reference-transaction:", "installed"]
    first = {p.name: p.read_bytes() for p in hooks.iterdir() if not p.name.endswith(".sample")}
    assert ok(repo, "hooks", "install").split() == [
        "pre-commit:", "updated", "reference-transaction:", "updated"]
    again = {p.name: p.read_bytes() for p in hooks.iterdir() if not p.name.endswith(".sample")}
    assert again == first and "pre-commit.gitwal-chained" in again

    (repo / "README").write_text("changed\n")
    assert git_env(repo, "commit", "-qam", "c").returncode == 0
    assert (repo / ".git" / "user-hook-ran").read_text() == "ran\n"

    ok(repo, "hooks", "uninstall")
    assert (hooks / "pre-commit").read_text() == user
    assert not (hooks / "reference-transaction").exists()
    assert not (hooks / "pre-commit.gitwal-chained").exists()


def test_pre_commit_refuses_while_an_intent_is_open(repo: Path) -> None:
    ok(repo, "hooks", "install")
    run = ok(repo, "begin").strip()
    killed = wal(repo, "apply", "ensure-line", "README", "x",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL
    (repo / "other.txt").write_text("x\n")
    git(repo, "add", "other.txt")
    refused = git_env(repo, "commit", "-qm", "half-applied")
    assert refused.returncode == 1
    assert f"git wal recover --run {run}" in refused.stderr
    assert wal(repo, "hooks", "check").returncode == 1
    ok(repo, "recover")
    assert git_env(repo, "commit", "-qm", "fine now").returncode == 0
    assert wal(repo, "hooks", "check").returncode == 0


def test_reference_transaction_allows_appends_refuses_rewrites(repo: Path) -> None:
    ok(repo, "hooks", "install")
    run = ok(repo, "begin").strip()
    ok(repo, "apply", "ensure-line", "README", "x")
    ref = f"refs/wal/{run}"
    head = git(repo, "rev-parse", ref).strip()

    deleted = git_env(repo, "update-ref", "-d", ref)
    assert deleted.returncode != 0 and f"git wal drop {run}" in deleted.stderr
    reset = git_env(repo, "update-ref", ref, f"{ref}~1")
    assert reset.returncode != 0 and "does not extend" in reset.stderr
    assert git(repo, "rev-parse", ref).strip() == head

    assert git_env(repo, "gc", "-q", "--prune=now").returncode == 0  # pack-refs is fine
    ok(repo, "apply", "ensure-line", "README", "y")  # gitwal appends (libgit2: no hook)
    assert git_env(repo, "update-ref", "-d", ref).returncode != 0
    ok(repo, "log")


def test_server_side_refuses_force_push_and_delete_of_a_log(tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    ok(server, "hooks", "install")
    a = init_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(server))
    run = ok(a, "begin").strip()
    ok(a, "apply", "ensure-line", "README", "x")
    ref = f"refs/wal/{run}"
    assert git_env(a, "push", "-q", "origin", f"{ref}:{ref}").returncode == 0
    ok(a, "apply", "ensure-line", "README", "y")
    assert git_env(a, "push", "-q", "origin", f"{ref}:{ref}").returncode == 0  # an append

    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(server), str(b))
    git(b, "fetch", "-q", "origin", f"{ref}:{ref}")
    forced = git_env(b, "push", "-q", "--force", "origin", f"{ref}~2:{ref}")
    assert forced.returncode != 0 and "does not extend" in forced.stderr
    gone = git_env(b, "push", "-q", "origin", f":{ref}")
    assert gone.returncode != 0 and "refusing to delete" in gone.stderr
    assert git(server, "rev-parse", ref) == git(a, "rev-parse", ref)
