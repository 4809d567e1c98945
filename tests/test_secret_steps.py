"""File steps on untracked secret-looking files: the log keeps hashes only
(the intent's ``withheld``), push sends no such bytes and refuses a log that
keeps them, and recovery and undo say "not restorable" instead of restoring
(docs/security.md "Secrets", docs/format.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, init_repo, ok, wal
from .test_agent_claude import pre_post
from .test_remotes import _bare

OLD = "API_TOKEN=old-4f1c9a\n"
NEW = "API_TOKEN=old-4f1c9a\nDEBUG=1\n"


def _has_object(repo: Path, data: str) -> bool:
    oid = git(repo, "hash-object", "--stdin", input=data.encode()).strip()
    found = git(repo, "cat-file", "--batch-check", input=f"{oid}\n".encode()).strip()
    return found != f"{oid} missing"


def _records(repo: Path, run: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(repo, "log", "--run", run, "--json").splitlines()]


def _repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo", {"README": "hello\n"})
    (repo / ".env").write_text(OLD)
    return repo


@pytest.mark.slow
def test_a_file_step_on_an_untracked_secret_keeps_hashes_only_and_push_sends_none(
        tmp_path: Path) -> None:
    server = _bare(tmp_path, "origin.git")
    repo = _repo(tmp_path)
    git(repo, "remote", "add", "origin", server.as_uri())
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    ok(repo, "apply", "--run", "r", "ensure-line", ".env", "DEBUG=1")
    ok(repo, "apply", "--run", "r", "write-file", "README", input=b"bye\n")
    assert (repo / ".env").read_text() == NEW
    [intent, readme] = [r for r in _records(repo, "r") if r["type"] == "intent"]
    assert intent["withheld"] == [".env"] and "withheld" not in readme
    # The line typed for it is as secret as its bytes: logged by id only.
    line_id = git(repo, "hash-object", "--stdin", input=b"DEBUG=1").strip()
    assert intent["args"]["line"] == f"withheld {line_id}"
    assert "DEBUG=1" not in ok(repo, "log", "--run", "r", "--json")
    # The ids are the bytes' hashes; the bytes themselves are nowhere in git.
    assert intent["pre"] == [git(repo, "hash-object", "--stdin", input=OLD.encode()).strip()]
    assert not _has_object(repo, OLD) and not _has_object(repo, NEW)
    assert "ok" in ok(repo, "verify", "--run", "r")
    ok(repo, "push", "--run", "r")
    assert git(server, "for-each-ref", "--format=%(refname)", "refs/wal/").split() == [
        "refs/wal/r"]
    assert not _has_object(server, OLD) and not _has_object(server, NEW)
    # Undo cannot put back what the log does not keep: refused, nothing written.
    refused = wal(repo, "undo", "--run", "r", "2")
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith(
        "error: undo: .env is a secret-looking file git does not track: the log keeps only "
        "hashes of its contents, so gitwal cannot put it back; nothing was undone")
    assert "hint:" in refused.stderr
    assert (repo / ".env").read_text() == NEW
    ok(repo, "undo", "--run", "r", "4")  # the README step undoes as ever
    assert (repo / "README").read_text() == "hello\n"


@pytest.mark.slow
def test_push_refuses_a_log_that_keeps_a_secret_files_image(tmp_path: Path) -> None:
    server = _bare(tmp_path, "origin.git")
    repo = _repo(tmp_path)
    git(repo, "remote", "add", "origin", server.as_uri())
    # A log written the old way: a file step that stored .env's bytes.
    git(repo, "config", "wal.secretDefaults", "false")
    ok(repo, "begin", "--run", "old", "--task", "old log")
    ok(repo, "apply", "--run", "old", "ensure-line", ".env", "DEBUG=1")
    assert _has_object(repo, OLD)
    git(repo, "config", "--unset", "wal.secretDefaults")
    refused = wal(repo, "push", "--run", "old")
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == (
        "error: refusing to push run old: its log holds .env, which matches a secret pattern "
        "and is not tracked in the run's base commit (the pre-image of file step LSN 2); "
        "nothing was pushed")
    assert "hint:" in refused.stderr
    assert git(server, "for-each-ref", "refs/wal/").strip() == ""
    assert not _has_object(server, OLD)


def test_a_killed_step_on_a_secret_is_left_in_doubt_never_restored(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    killed = wal(repo, "apply", "--run", "r", "--check", "false", "ensure-line", ".env",
                 "DEBUG=1", env={"GITWAL_CRASH_AT": "after-apply"})
    assert killed.returncode == -9, killed.stderr
    assert (repo / ".env").read_text() == NEW
    # Recovery finds the post-image, runs the check, which fails: the pre-image
    # it would restore is a hash only. In doubt, said so, nothing written.
    rec = wal(repo, "recover", "--run", "r", "--json")
    assert rec.returncode == 3, rec.stderr
    [outcome] = json.loads(rec.stdout)["intents"]
    assert outcome["outcome"] == "in-doubt" and outcome["open"], outcome
    assert "not restorable: the log keeps only the hash of .env's pre-image" in \
        outcome["detail"], outcome
    assert (repo / ".env").read_text() == NEW
    assert not _has_object(repo, OLD) and not _has_object(repo, NEW)


def test_a_failing_check_on_a_secret_puts_it_back_from_memory(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    failed = wal(repo, "apply", "--run", "r", "--check", "false", "ensure-line", ".env",
                 "DEBUG=1")
    assert failed.returncode != 0 and ".env restored" in failed.stderr, failed.stderr
    assert (repo / ".env").read_text() == OLD
    assert not _has_object(repo, OLD) and not _has_object(repo, NEW)


def test_an_agents_edit_of_a_secret_keeps_hashes_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    env_file = repo / ".env"
    edit = {"file_path": str(env_file), "old_string": "old-4f1c9a", "new_string": "new-77e0b2"}
    pre_post(repo, "Edit", edit, "toolu_1",
             lambda: env_file.write_text(OLD.replace("old-4f1c9a", "new-77e0b2")))
    [run] = json.loads(ok(repo, "runs", "--json"))
    recs = _records(repo, run["run"])
    [intent] = [r for r in recs if r["type"] == "intent"]
    assert intent["withheld"] == [".env"]
    assert [r["type"] for r in recs if r["type"] in ("commit", "abort")] == ["commit"]
    assert not _has_object(repo, OLD)
    assert not _has_object(repo, OLD.replace("old-4f1c9a", "new-77e0b2"))


# -- a checkpoint on the branch: the snapshot's tree, through a scratch index -------


def _index(repo: Path) -> dict[str, str]:
    out = git(repo, "ls-files", "-s").splitlines()
    return {line.split("\t", 1)[1]: line.split()[1] for line in out}


def _head_files(repo: Path) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", "HEAD").split())


def test_a_branch_checkpoint_never_commits_an_untracked_secret(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    ok(repo, "apply", "--run", "r", "write-file", "README", input=b"bye\n")
    ok(repo, "checkpoint", "--run", "r")
    assert _head_files(repo) == {"README"}
    assert git(repo, "show", "HEAD:README") == "bye\n"
    # The user's index follows the branch; .env is still theirs, untracked.
    assert git(repo, "status", "--porcelain") == "?? .env\n"
    assert not _has_object(repo, OLD)


def test_a_branch_checkpoint_keeps_what_the_user_staged(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"README": "hello\n", "a.txt": "a\n"})
    (repo / ".env").write_text(OLD)
    (repo / "a.txt").write_text("a staged\n")
    git(repo, "add", "a.txt")
    (repo / "a.txt").write_text("a staged\nand more, not staged\n")
    staged = git(repo, "rev-parse", ":a.txt").strip()
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    ok(repo, "apply", "--run", "r", "write-file", "README", input=b"bye\n")
    ok(repo, "checkpoint", "--run", "r", "--include-unlogged")
    assert _head_files(repo) == {"README", "a.txt"}
    assert git(repo, "show", "HEAD:a.txt") == "a staged\nand more, not staged\n"
    index = _index(repo)
    assert index["a.txt"] == staged  # their staged bytes, kept
    assert index["README"] == git(repo, "rev-parse", "HEAD:README").strip()
    assert ".env" not in index


# -- a failing shell step and the secret-looking files its snapshots leave out ------


def test_a_failing_shell_step_names_the_secrets_it_left_and_puts_back_watched_ones(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ok(repo, "begin", "--run", "r", "--task", "secrets")
    failed = wal(repo, "exec", "--run", "r", "--json", "--", "sh", "-c",
                 "echo LEAKED=1 >> .env; echo y > y.txt; exit 1")
    assert failed.returncode == 1
    error = json.loads(failed.stdout)["error"]
    assert ("left as the command left them (secret-looking, never snapshotted; --watch PATH "
            "puts one back): .env") in error, error
    [abort] = [r for r in _records(repo, "r") if r["type"] == "abort"]
    assert abort["reason"].endswith("--watch PATH puts one back): .env")
    assert (repo / ".env").read_text() == OLD + "LEAKED=1\n"
    assert not (repo / "y.txt").exists()
    # Watched, it is put back from memory; the command's version is kept aside.
    (repo / ".env").write_text(OLD)
    failed = wal(repo, "exec", "--run", "r", "--watch", ".env", "--", "sh", "-c",
                 "echo LEAKED=2 >> .env; exit 1")
    assert failed.returncode == 1
    assert "restored .env (watched, secret-looking); the command's version is kept in " \
        in failed.stderr, failed.stderr
    assert (repo / ".env").read_text() == OLD
    [kept] = (repo / ".git" / "wal" / "kept").glob("r.*/.env")
    assert kept.read_text() == OLD + "LEAKED=2\n" and kept.stat().st_mode & 0o777 == 0o600
    aborts = [r for r in _records(repo, "r") if r["type"] == "abort"]
    assert aborts[-1]["restored"] == [".env"]
    assert not _has_object(repo, OLD)
