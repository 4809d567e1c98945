"""Secret-looking untracked files stay out of snapshots, `unlogged` records and
pushes (docs/security.md "Secrets"); tracked files stay in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, wal
from .test_agent_claude import by_type, pre_post
from .test_agent_payloads import claude_tool, run_hook
from .test_remotes import _bare

SECRET = "API_TOKEN=do-not-leak-4f1c\n"
PEM = "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n"


def _repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo", {"README": "hello\n", ".env.example": "API_TOKEN=\n"})
    (repo / ".env").write_text(SECRET)
    (repo / "keys").mkdir()
    (repo / "keys" / "server.pem").write_text(PEM)
    (repo / "notes.txt").write_text("untracked, not a secret\n")
    return repo


def _names(repo: Path, tree: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", tree).split("\n")) - {""}


def _has_object(repo: Path, data: str) -> bool:
    oid = git(repo, "hash-object", "--stdin", input=data.encode()).strip()
    found = git(repo, "cat-file", "--batch-check", input=f"{oid}\n".encode()).strip()
    return found != f"{oid} missing"


def _exec_trees(repo: Path, run: str) -> tuple[str, str]:
    rows = [json.loads(line) for line in ok(repo, "log", "--run", run, "--json").splitlines()]
    [intent] = [r for r in rows if r["type"] == "intent" and r["tool"] == "exec"]
    [commit] = [r for r in rows if r["type"] == "commit" and r["intent"] == intent["lsn"]]
    return _one(intent["pre"]), _one(commit["post"])


def _one(value: str | list[str]) -> str:
    return value if isinstance(value, str) else value[0]


def test_exec_snapshots_leave_untracked_secrets_out(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    git(repo, "config", "--add", "wal.secretPattern", "*.private")
    (repo / "mine.private").write_text("configured pattern\n")
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    ok(repo, "exec", "--run", "r", "--", "sh", "-c", "echo out > out.txt; echo more >> .env")
    pre, post = _exec_trees(repo, "r")
    assert _names(repo, pre) == {"README", ".env.example", "notes.txt"}
    assert _names(repo, post) == {"README", ".env.example", "notes.txt", "out.txt"}
    # Never read into the object database at all.
    assert not _has_object(repo, SECRET) and not _has_object(repo, SECRET + "more\n")
    assert not _has_object(repo, PEM)
    assert (repo / ".env").read_text() == SECRET + "more\n"  # the file itself is untouched


def test_a_repositorys_gitignore_cannot_re_include_a_secret(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".gitignore").write_text("!.env\n!*.pem\n")
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    ok(repo, "exec", "--run", "r", "--", "sh", "-c", "echo again >> .env")
    pre, post = _exec_trees(repo, "r")
    for tree in (pre, post):  # the first snapshot, and a later one after a change
        assert ".env" not in _names(repo, tree) and "keys/server.pem" not in _names(repo, tree)
        assert ".gitignore" in _names(repo, tree)


@pytest.mark.slow
def test_the_defaults_can_be_turned_off_and_a_pattern_negated(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    git(repo, "config", "--add", "wal.secretPattern", "!server.pem")
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    ok(repo, "exec", "--run", "r", "--", "true")
    pre, _ = _exec_trees(repo, "r")
    assert "keys/server.pem" in _names(repo, pre) and ".env" not in _names(repo, pre)
    git(repo, "config", "wal.secretDefaults", "false")
    ok(repo, "exec", "--run", "r", "--", "true")
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    last = [r for r in rows if r["type"] == "intent"][-1]
    assert ".env" in _names(repo, _one(last["pre"]))


def test_unlogged_records_leave_untracked_secrets_out(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    pre_post(repo, "Edit", edit, "toolu_1", lambda: (repo / "README").write_text("bye\n"))
    (repo / ".env").write_text(SECRET + "changed\n")  # behind the log
    (repo / ".env.local").write_text(SECRET)
    (repo / ".env.example").write_text("API_TOKEN=changed\n")  # tracked: it is recorded
    (repo / "stray.txt").write_text("new\n")
    other = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", other,
                                                "toolu_2")).code == 0
    first, unlogged = by_type(repo, "unlogged")
    assert first["paths"] == ["notes.txt"]  # untracked before the session: not a secret
    assert unlogged["paths"] == [".env.example", "stray.txt"]
    assert not _has_object(repo, SECRET + "changed\n") and not _has_object(repo, SECRET)


@pytest.mark.slow
def test_push_refuses_a_log_that_holds_an_untracked_secret(tmp_path: Path) -> None:
    server = _bare(tmp_path, "origin.git")
    repo = _repo(tmp_path)
    git(repo, "remote", "add", "origin", server.as_uri())
    # A log written the old way: snapshots that took every untracked file.
    git(repo, "config", "wal.secretDefaults", "false")
    ok(repo, "begin", "--run", "old", "--task", "old log")
    ok(repo, "exec", "--run", "old", "--", "true")
    pre, _ = _exec_trees(repo, "old")
    assert ".env" in _names(repo, pre)
    git(repo, "config", "--unset", "wal.secretDefaults")

    refused = wal(repo, "push", "--run", "old")
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == (
        "error: refusing to push run old: its log holds .env, which matches a secret pattern "
        "and is not tracked in the run's base commit (the pre tree of exec step LSN 2) "
        "(and 1 more path(s)); nothing was pushed")
    assert "hint: if it is not a secret, allow it with `git config --add wal.secretPattern " \
           "'!/.env'`" in refused.stderr
    assert git(server, "for-each-ref", "refs/wal/").strip() == ""

    # A run written now pushes; the tracked .env.example is no secret.
    ok(repo, "begin", "--run", "new", "--task", "new log")
    ok(repo, "exec", "--run", "new", "--", "true")
    ok(repo, "push", "--run", "new")
    assert git(server, "for-each-ref", "--format=%(refname)", "refs/wal/").split() == [
        "refs/wal/new"]
    # Allowed explicitly, the old run goes too.
    git(repo, "config", "--add", "wal.secretPattern", "!/.env")
    git(repo, "config", "--add", "wal.secretPattern", "!server.pem")
    ok(repo, "push", "--run", "old")


def test_the_python_matcher_agrees_with_git_on_the_patterns(tmp_path: Path) -> None:
    """The push check matches in Python; snapshots let git match: same answers."""
    from gitwal.worktree import secrets

    pats = [*secrets.DEFAULT_PATTERNS, "!/.env.example", "build/", "/top.txt", "**/deep/*.bin",
            "[ab]c.cfg"]
    paths = [".env", "a/.env", ".env.local", ".envx", ".env.example", "a/.env.example",
             "k/server.pem", "id_rsa.pub", "x/id_ed25519", "build/out.o", "src/build/x",
             "buildx/y", "top.txt", "a/top.txt", "a/b/deep/z.bin", "deep/z.bin", "ac.cfg",
             "cc.cfg", "credentials.json", "src/credentials.json.bak", "README"]
    repo = init_repo(tmp_path / "m")
    for p in paths:
        (repo / p).parent.mkdir(parents=True, exist_ok=True)
        (repo / p).write_text("x\n")
    args = ["ls-files", "--others", "--ignored"]
    for p in pats:
        args += ["--exclude", p]
    by_git = set(git(repo, *args).split())
    match = secrets.matcher(pats)
    assert {p for p in paths if match(p)} == by_git
    assert ".env" in by_git and ".env.example" not in by_git and "a/.env.example" in by_git
