"""`git wal verify --remote NAME`: the logs as a remote holds them, read from a
copy fetched for reading only, so CI can verify what several machines pushed
without integrating it (real servers: `git daemon`, and smart HTTP)."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pygit2
import pytest

from gitwal.records.codec import decode, encode
from gitwal.records.model import Commit

from .conftest import git, ok, wal
from .gitservers import GitDaemon, GitServer
from .test_json_schema import document, failed
from .test_order_remote import _remote, _write
from .test_remotes import _clone


def _verify(repo: Path, *args: str, code: int = 0) -> dict[str, object]:
    """The `verify` document, held against docs/json-schema."""
    found: dict[str, object] = document(wal(repo, "verify", *args, "--json"), "verify", code)
    return found


def _results(report: dict[str, object]) -> dict[str, dict[str, object]]:
    runs = report["runs"]
    assert isinstance(runs, list)
    return {r["run"]: r for r in runs}


def _error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The stderr of a refused request: `error:` then `hint:`, no traceback."""
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("error: ") and "\nhint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr


def _forge_commit_record(repo: Path, run: str) -> str:
    """``run``'s newest append again, its commit record naming a post-image no
    step wrote: what anyone who may force a ref on the remote could push."""
    r = pygit2.Repository(str(repo))
    head = r.revparse_single(f"refs/wal/{run}")
    assert isinstance(head, pygit2.Commit)
    builder = r.TreeBuilder(head.tree)
    forged = None
    for entry in head.tree:
        if entry.name.endswith(".json"):
            blob = r.get(entry.id)
            assert isinstance(blob, pygit2.Blob)
            rec = decode(blob.data, entry.name)
            assert isinstance(rec, Commit)
            other = str(r.create_blob(b"forged\n"))
            forged = encode(dataclasses.replace(rec, post=(other,)))
            builder.insert(entry.name, r.create_blob(forged), pygit2.enums.FileMode.BLOB)
    assert forged is not None
    oid = r.create_commit(None, head.author, head.committer, head.message,
                          builder.write(), head.parent_ids)
    return str(oid)


@pytest.mark.slow
def test_a_clean_remote_verifies_with_its_runs_and_the_remote_named(
        git_server: GitServer, tmp_path: Path) -> None:
    url = _remote(git_server, tmp_path)
    a = _clone(tmp_path, url, "a")
    b = _clone(tmp_path, url, "b")
    run_a = ok(a, "begin", "--task", "a's part").strip()
    _write(a, "a.txt", "from a\n")
    ok(a, "push")
    run_b = ok(b, "begin", "--task", "b's part").strip()
    _write(b, "b.txt", "from b\n")
    ok(b, "push")

    ci = _clone(tmp_path, url, "ci")
    assert ok(ci, "verify", "--all").strip() == "no runs to verify"  # none of its own
    report = _verify(ci, "--all", "--remote", "origin")
    assert report["ok"] is True and report["remote"] == "origin"
    results = _results(report)
    assert sorted(results) == sorted([run_a, run_b])
    assert all(r["ok"] is True and r["records"] == 3 for r in results.values())

    text = ok(ci, "verify", "--all", "--remote", "origin").splitlines()
    assert text[-1] == "verified 2 run(s) on remote origin: all ok"
    assert {ln.split(":")[0] for ln in text[:-1]} == {f"ok   {run_a}", f"ok   {run_b}"}
    suite = ET.fromstring(ok(ci, "verify", "--run", run_b, "--remote", "origin",
                             "--format", "junit"))
    assert [c.get("name") for c in suite.iter("testcase")] == [run_b]
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [
        ("remote", "origin")]
    # Read only: the copy lives under refs/wal-remote/; no local log was made.
    assert git(ci, "for-each-ref", "--format=%(refname)", "refs/wal/") == ""
    assert _verify(ci, "--all")["remote"] is None


@pytest.mark.slow
def test_a_run_only_on_the_remote_is_verified_and_a_local_only_run_is_not(
        git_daemon: GitDaemon, tmp_path: Path) -> None:
    url = _remote(git_daemon, tmp_path)
    a = _clone(tmp_path, url, "a")
    b = _clone(tmp_path, url, "b")
    pushed = ok(a, "begin", "--task", "pushed").strip()
    _write(a, "a.txt", "a\n")
    ok(a, "push")
    kept = ok(b, "begin", "--task", "kept here").strip()
    _write(b, "b.txt", "b\n")

    report = _verify(b, "--all", "--remote", "origin")
    assert list(_results(report)) == [pushed] and report["ok"] is True
    assert list(_results(_verify(b, "--all"))) == [kept]  # this clone's own, unchanged
    assert list(_results(_verify(b, "--run", pushed, "--remote", "origin"))) == [pushed]
    stderr = _error(wal(b, "verify", "--run", kept, "--remote", "origin"), 1)
    assert f"remote origin has no log of run {kept}" in stderr
    assert "git ls-remote origin" in stderr


@pytest.mark.slow
def test_a_log_rewritten_on_the_remote_fails_there_and_the_local_copy_still_verifies(
        git_daemon: GitDaemon, tmp_path: Path) -> None:
    # A host without gitwal's pre-receive (GitHub, say) takes a forced push.
    url = _remote(git_daemon, tmp_path, guarded=False)
    a = _clone(tmp_path, url, "a")
    run = ok(a, "begin", "--task", "honest").strip()
    _write(a, "a.txt", "a\n")
    ok(a, "push")
    head = git(a, "rev-parse", f"refs/wal/{run}").strip()
    assert _verify(a, "--all", "--remote", "origin")["ok"] is True

    forged = _forge_commit_record(a, run)
    git(a, "push", "-q", "--force", url, f"{forged}:refs/wal/{run}")

    report = _verify(a, "--all", "--remote", "origin", code=1)
    assert report["ok"] is False and report["remote"] == "origin"
    failures = _results(report)[run]["failures"]
    assert isinstance(failures, list)
    assert ("intent", 3) in {(f["check"], f["lsn"]) for f in failures}
    text = wal(a, "verify", "--run", run, "--remote", "origin")
    assert text.returncode == 1 and f"FAIL {run}:" in text.stdout
    assert text.stdout.splitlines()[-1] == "verified 1 run(s) on remote origin: 1 failed"
    # What was fetched is data: the local log did not move, and still verifies.
    assert git(a, "rev-parse", f"refs/wal/{run}").strip() == head
    assert git(a, "rev-parse", f"refs/wal-remote/origin/wal/{run}").strip() == forged
    assert _verify(a, "--all")["ok"] is True


@pytest.mark.slow
def test_archives_detached_checkpoints_and_signatures_are_read_from_the_remote(
        git_daemon: GitDaemon, tmp_path: Path) -> None:
    url = _remote(git_daemon, tmp_path)
    a = _clone(tmp_path, url, "a")
    keys = tmp_path / "keys"
    ok(a, "keygen", "--path", str(keys / "signer"))
    git(a, "config", "wal.signingKey", str(keys / "signer"))
    run = ok(a, "begin", "--task", "signed").strip()             # 1
    _write(a, "a.txt", "a\n")                                    # 2, 3
    ok(a, "checkpoint", "--detached")                            # 4
    ok(a, "compact")                                             # the chain before 4: archived
    _write(a, "b.txt", "b\n")                                    # 5, 6
    ok(a, "seal")                                                # 7
    ok(a, "push")
    allowed = keys / "allowed_signers"
    ok(a, "trust", "add", "--file", str(allowed), "--name", "ci@example",
       str(keys / "signer.pub"))
    strict = ("--allowed-signers", str(allowed), "--require-signed", "--require-sealed")

    ci = _clone(tmp_path, url, "ci")  # holds no archive and no checkpoint ref of its own
    report = _verify(ci, "--all", "--remote", "origin", *strict)
    assert report["ok"] is True, report
    assert _results(report)[run]["records"] == 7  # the archived segment was read too
    assert report["allowed_signers"] == str(allowed)
    assert git(ci, "for-each-ref", "refs/wal-archive/", "refs/wal-checkpoints/") == ""


def test_verify_remote_refuses_a_request_it_cannot_serve(repo: Path) -> None:
    stderr = _error(wal(repo, "verify", "--all", "--remote", "nowhere"), 1)
    assert "no remote named 'nowhere'" in stderr
    failed(wal(repo, "verify", "--all", "--remote", "nowhere", "--json"), 1, "WalError")
    stderr = _error(wal(repo, "verify", "--remote", "origin"), 2)
    assert "--remote needs --all or --run" in stderr


@pytest.mark.slow
def test_a_remote_that_is_down_is_an_error_with_a_hint(
        git_daemon: GitDaemon, tmp_path: Path) -> None:
    url = _remote(git_daemon, tmp_path)
    a = _clone(tmp_path, url, "a")
    ok(a, "begin", "--task", "t")
    ok(a, "push")
    git_daemon.stop()
    stderr = _error(wal(a, "verify", "--all", "--remote", "origin"), 1)
    assert "git fetch origin failed" in stderr and "no local log was changed" in stderr
    assert ok(a, "verify", "--all").splitlines()[-1] == "verified 1 run(s): all ok"
