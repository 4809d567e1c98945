"""The real Claude Code across clones and secrets: a fetched run's open step binds
nobody here, and an Edit of an untracked secret-looking file keeps hashes only
(docs/security.md, "Authority" and "File steps on secret-looking files")."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from .agents import Steps
from .claude import VENV_BIN, ClaudeCode, cmd, git_wal, make_project, sealed_env
from .fake_api import FakeApi, ToolUse

SECRET = "API_KEY=old-5d0c71\n"


def read_then_edit(path: Path, old: str, new: str) -> list[ToolUse]:
    return [ToolUse("Read", {"file_path": str(path)}),
            ToolUse("Edit", {"file_path": str(path), "old_string": old, "new_string": new})]


def log_of(repo: Path, run: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git_wal(repo, "log", "--json", "--run", run, env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def claude_runs(repo: Path, env: dict[str, str]) -> list[str]:
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    return [str(r["run"]) for r in rows if str(r["run"]).startswith("claude-")]


def piped(repo: Path, argv: list[str], data: str, env: dict[str, str]) -> str:
    return subprocess.run(argv, cwd=repo, env=env, input=data, capture_output=True,
                          text=True, check=True).stdout


def has_object(repo: Path, data: str, env: dict[str, str]) -> bool:
    oid = piped(repo, ["git", "hash-object", "--stdin"], data, env).strip()
    found = piped(repo, ["git", "cat-file", "--batch-check"], oid + "\n", env)
    return found.strip() != f"{oid} missing"


def test_claudes_edit_of_an_untracked_env_file_keeps_hashes_only_and_push_sends_none(
        tmp_path: Path, claude_bin: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"a.txt": "alpha\n"}, env)
    (repo / ".env").write_text(SECRET)  # the user's, untracked
    new = SECRET.replace("old-5d0c71", "new-9e3a40")
    steps = read_then_edit(repo / ".env", "old-5d0c71", "new-9e3a40")
    with FakeApi(Steps(steps), log_path=tmp_path / "requests.jsonl") as api:
        out = ClaudeCode(claude_bin, tmp_path / "home", api.url).run(
            repo, "Rotate the key.", session_id=str(uuid.uuid4()))
        assert out.returncode == 0 and api.errors == [], out.stderr
    assert (repo / ".env").read_text() == new
    [run] = claude_runs(repo, env)
    recs = log_of(repo, run, env)
    [intent] = [r for r in recs if r["type"] == "intent" and r["target"] == [".env"]]
    assert intent["withheld"] == [".env"], intent
    assert any(r["type"] == "commit" and r["intent"] == intent["lsn"] for r in recs)
    # Neither the old nor the new key is an object of this repository ...
    assert not has_object(repo, SECRET, env) and not has_object(repo, new, env)
    # ... so the pushed log carries neither.
    remote = tmp_path / "remote.git"
    cmd(tmp_path, "git", "init", "-q", "--bare", str(remote), env=env)
    cmd(repo, "git", "remote", "add", "origin", str(remote), env=env)
    git_wal(repo, "push", "--run", run, env=env)
    assert not has_object(remote, SECRET, env) and not has_object(remote, new, env)


def test_a_fetched_runs_open_step_does_not_refuse_claudes_edit(
        tmp_path: Path, claude_bin: Path) -> None:
    env = sealed_env(tmp_path / "home")
    seed = make_project(tmp_path / "seed", {"a.txt": "alpha\n"}, env)
    server = tmp_path / "server.git"
    cmd(tmp_path, "git", "clone", "-q", "--bare", str(seed), str(server), env=env)
    other = tmp_path / "other"
    cmd(tmp_path, "git", "clone", "-q", str(server), str(other), env=env)
    # Another clone's run: a step on a.txt whose process was killed after its
    # intent, so the intent stays open there; pushed to the shared remote.
    theirs = git_wal(other, "begin", "--task", "theirs", env=env).stdout.strip()
    crashed = cmd(other, str(VENV_BIN / "git-wal"), "apply",
                  "ensure-line", "a.txt", "theirs",
                  env={**env, "GITWAL_CRASH_AT": "after-intent"}, ok=(-9,))
    assert crashed.returncode == -9
    git_wal(other, "push", "--run", theirs, env=env)

    repo = tmp_path / "repo"
    cmd(tmp_path, "git", "clone", "-q", str(server), str(repo), env=env)
    git_wal(repo, "fetch", "--run", theirs, env=env)
    fetched = log_of(repo, theirs, env)
    assert fetched[-1]["type"] == "intent" and fetched[-1]["target"] == ["a.txt"]
    steps = read_then_edit(repo / "a.txt", "alpha", "beta")
    with FakeApi(Steps(steps), log_path=tmp_path / "requests.jsonl") as api:
        out = ClaudeCode(claude_bin, tmp_path / "home", api.url).run(
            repo, "Edit a.txt.", session_id=str(uuid.uuid4()))
        assert out.returncode == 0 and api.errors == [], out.stderr
    assert (repo / "a.txt").read_text() == "beta\n"
    [run] = claude_runs(repo, env)
    recs = log_of(repo, run, env)
    [edit] = [r for r in recs if r["type"] == "intent" and r["target"] == ["a.txt"]]
    assert any(r["type"] == "commit" and r["intent"] == edit["lsn"] for r in recs), recs
    assert log_of(repo, theirs, env) == fetched  # the fetched run is left as it was
