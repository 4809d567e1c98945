"""`git wal seal`: the signed last record of a run, and nothing after it.

Real repositories, keys made by `git wal keygen`, signatures checked by git.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pygit2
import pytest

from gitwal.base.ids import Lsn, RunId
from gitwal.log.store import Ref, Store
from gitwal.records.model import Unlogged

from .conftest import git, ok, tree_of, wal

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                      reason="ssh-keygen not installed")
RUN = "r1"


def signing(repo: Path, tmp_path: Path) -> Path:
    """Configure a fresh key for the repository; returns the allowed-signers file."""
    key = tmp_path / "keys" / "signing_key"
    ok(repo, "keygen", "--path", str(key), "--configure")
    allowed = tmp_path / "allowed_signers"
    ok(repo, "trust", "add", f"{key}.pub", "--name", "walsigner@ci", "--file", str(allowed))
    return allowed


def head(repo: Path) -> str:
    return git(repo, "rev-parse", f"refs/wal/{RUN}").strip()


def records(repo: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in ok(repo, "log", "--run", RUN, "--json").splitlines()]


@pytest.mark.slow
@needs_ssh_keygen
def test_seal_appends_a_signed_final_record(repo: Path, tmp_path: Path) -> None:
    allowed = signing(repo, tmp_path)
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "ensure-line", "README", "two")
    ok(repo, "exec", "--", "sh", "-c", "echo made > made.txt")
    before = head(repo)
    out = json.loads(ok(repo, "seal", "--json"))
    after = head(repo)
    assert out == {"lsn": 6, "last": 5, "head": before, "tree": tree_of(repo),
                   "commit": after, "fingerprint": out["fingerprint"]}
    assert records(repo)[-1] == {"v": 1, "type": "seal", "run": RUN, "lsn": 6, "last": 5,
                                 "head": before, "tree": tree_of(repo)}
    assert git(repo, "rev-parse", f"{after}^").strip() == before
    assert f"obj-{tree_of(repo)}" in git(repo, "ls-tree", "--name-only", after).split()
    verified = git(repo, "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}",
                   "log", "-1", "--format=%G? %GS %GF", after).split()
    assert verified == ["G", "walsigner@ci", out["fingerprint"]]


def test_seal_needs_a_signing_key(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN)
    before = head(repo)
    proc = wal(repo, "seal")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: a seal must be signed, and no signing key is configured (wal.signingKey)",
        "hint: create one with `git wal keygen --configure` (or point `git config "
        "wal.signingKey PATH` at an Ed25519 key), trust it with `git wal trust add`, then seal",
    ]
    assert head(repo) == before


@pytest.mark.slow
@needs_ssh_keygen
def test_seal_refuses_an_open_intent(repo: Path, tmp_path: Path) -> None:
    signing(repo, tmp_path)
    ok(repo, "begin", "--run", RUN)
    killed = wal(repo, "apply", "ensure-line", "README", "x",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL
    before = head(repo)
    proc = wal(repo, "seal")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"error: run {RUN}: intent LSN 2 (ensure_line README) is open",
        f"hint: run `git wal recover --run {RUN}` first, then seal",
    ]
    assert head(repo) == before
    ok(repo, "recover")
    assert json.loads(ok(repo, "seal", "--json"))["lsn"] == 4


@pytest.mark.slow
@needs_ssh_keygen
def test_seal_refuses_a_tree_the_log_does_not_explain(repo: Path, tmp_path: Path) -> None:
    signing(repo, tmp_path)
    ok(repo, "begin", "--run", RUN)
    ok(repo, "apply", "ensure-line", "README", "two")
    (repo / "stray.txt").write_text("by hand\n")
    (repo / "README").write_text("hello\ntwo\nedited by hand\n")
    before = head(repo)
    proc = wal(repo, "seal")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("error: the working tree is not what the log explains: ")
    assert "stray.txt changed (absent -> " in lines[0]
    assert "but no step or unlogged record explains it" in lines[0]
    assert "; README is " in lines[0] and ", but the log leaves it " in lines[0]
    assert lines[1].startswith("hint: record the changes as steps, undo them, or disclose "
                               "them with `git wal checkpoint --detached --include-unlogged`")
    assert head(repo) == before

    # An `unlogged` record (what an agent hook writes when it notices) counts as seen.
    (repo / "README").write_text("hello\ntwo\n")
    repository = pygit2.Repository(str(repo))
    store = Store(repository, RunId(RUN))
    blob = store.put_blob(b"by hand\n")
    rec = Unlogged(RunId(RUN), Lsn(4), ("stray.txt",), ("absent",), (blob,), "test")
    store.append([rec], [Ref(blob)], store.head())
    assert json.loads(ok(repo, "seal", "--json"))["lsn"] == 5


@pytest.mark.slow
@needs_ssh_keygen
def test_nothing_is_appended_after_a_seal(repo: Path, tmp_path: Path) -> None:
    signing(repo, tmp_path)
    ok(repo, "begin", "--run", RUN)
    ok(repo, "apply", "ensure-line", "README", "two")
    ok(repo, "checkpoint", "--detached")
    ok(repo, "apply", "ensure-line", "README", "three")
    ok(repo, "seal")
    sealed = head(repo)
    refused = f"error: run {RUN} is sealed (LSN 7): it cannot be appended to"
    hint = "hint: a sealed run is finished; start a new one with `git wal begin`"
    attempts: list[tuple[str, ...]] = [
        ("apply", "ensure-line", "README", "four"),
        ("apply", "write-file", "new.txt", "--from", "-"),
        ("exec", "--", "sh", "-c", "echo ran > ran.txt"),
    ]
    for args in attempts:
        proc = wal(repo, *args, input=b"x\n")
        assert proc.returncode == 1, args
        assert proc.stderr.splitlines() == [refused, hint], args
        assert head(repo) == sealed, args
    branch = git(repo, "rev-parse", "HEAD")
    checkpoints = git(repo, "for-each-ref", "refs/wal-checkpoints/")
    for args in [("checkpoint",), ("checkpoint", "--detached")]:
        proc = wal(repo, *args)
        assert proc.returncode == 1, args
        assert proc.stderr.splitlines() == [
            f"error: run {RUN} is sealed (LSN 7): it cannot be checkpointed", hint], args
        assert head(repo) == sealed, args
    # refused before anything was committed: no stray commit or checkpoint ref
    assert git(repo, "rev-parse", "HEAD") == branch
    assert git(repo, "for-each-ref", "refs/wal-checkpoints/") == checkpoints
    assert json.loads(ok(repo, "status", "--json"))["sealed"] == 7
    assert "sealed at LSN 7" in ok(repo, "status")
    gate = json.loads(ok(repo, "gate", "--json"))
    assert gate["safe"] and "sealed" in gate["reason"], gate
    assert not (repo / "ran.txt").exists() and not (repo / "new.txt").exists()
    assert (repo / "README").read_text() == "hello\ntwo\nthree\n"

    compact = wal(repo, "compact")
    assert compact.returncode == 1 and compact.stderr.splitlines() == [
        f"error: run {RUN} is sealed (LSN 7): it cannot be compacted", hint]
    again = wal(repo, "seal")
    assert again.returncode == 1 and again.stderr.splitlines() == [
        f"error: run {RUN} is sealed already (LSN 7)", hint]
    begin = wal(repo, "begin", "--run", RUN)
    assert begin.returncode == 1 and f"run {RUN} already exists" in begin.stderr
    report = json.loads(ok(repo, "recover", "--json"))  # nothing open: nothing to append
    assert report["records"] == 7
    assert head(repo) == sealed
    # a dropped sealed run keeps its seal in the archive
    ok(repo, "drop", RUN)
    assert git(repo, "rev-parse", f"refs/wal-archive/{RUN}/1").strip() == sealed


@pytest.mark.slow
@needs_ssh_keygen
def test_seal_after_compaction_starts_from_the_checkpoint(repo: Path, tmp_path: Path) -> None:
    signing(repo, tmp_path)
    ok(repo, "begin", "--run", RUN)
    ok(repo, "apply", "write-file", "a.txt", input=b"a\n")
    (repo / "disclosed.txt").write_text("outside the log\n")
    ok(repo, "checkpoint", "--detached", "--include-unlogged")
    ok(repo, "compact")
    ok(repo, "apply", "ensure-line", "a.txt", "b")
    out = json.loads(ok(repo, "seal", "--json"))
    assert (out["lsn"], out["last"], out["tree"]) == (7, 6, tree_of(repo))
    assert os.path.exists(repo / "disclosed.txt")
