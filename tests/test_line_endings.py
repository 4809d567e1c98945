"""Files git converts between the working tree and its blobs (core.autocrlf,
``text=auto`` in .gitattributes, Git LFS): a shell step's snapshots hold the
bytes on disk, so a rollback, an undo and ``recover --restore`` put back
exactly the bytes the file held, and nothing git's form differs in counts as
someone else's edit. Real git, real .gitattributes, the real git-lfs."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, wal

CRLF = b"one\r\ntwo\r\n"


def converting(tmp_path: Path, how: str) -> Path:
    """A repository whose f.txt holds CRLF on disk and LF in its blob."""
    repo = init_repo(tmp_path / "repo")
    if how == "autocrlf":
        git(repo, "config", "core.autocrlf", "true")
    else:
        (repo / ".gitattributes").write_text("* text=auto\n")
    (repo / "f.txt").write_bytes(CRLF)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "crlf")
    assert git(repo, "cat-file", "-p", "HEAD:f.txt").encode() == b"one\ntwo\n"
    assert git(repo, "status", "--porcelain") == ""
    return repo


def steps(repo: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]


@pytest.mark.parametrize("how", ["autocrlf", "text-auto"])
def test_a_failing_shell_step_rolls_back_a_crlf_file(tmp_path: Path, how: str) -> None:
    repo = converting(tmp_path, how)
    ok(repo, "begin", "--task", "t")
    r = wal(repo, "exec", "--", "sh", "-c", r"printf 'three\r\n' >> f.txt; exit 1")
    assert r.returncode == 1
    assert "1 changed path(s) restored" in r.stderr, r.stderr
    assert "gitwal did not write" not in r.stderr
    assert (repo / "f.txt").read_bytes() == CRLF


@pytest.mark.parametrize("how", ["autocrlf", "text-auto"])
def test_undo_of_a_shell_step_keeps_crlf(tmp_path: Path, how: str) -> None:
    repo = converting(tmp_path, how)
    ok(repo, "begin", "--task", "t")
    ok(repo, "exec", "--", "sh", "-c", r"printf 'three\r\n' >> f.txt")
    ok(repo, "undo")  # not refused: the file holds what the step left
    assert (repo / "f.txt").read_bytes() == CRLF
    ok(repo, "redo")
    assert (repo / "f.txt").read_bytes() == CRLF + b"three\r\n"
    # A person's edit since: --force saves it and puts back the CRLF bytes.
    (repo / "f.txt").write_bytes(CRLF + b"mine\r\n")
    assert wal(repo, "undo").returncode != 0
    out = ok(repo, "undo", "--force", "--json")
    assert (repo / "f.txt").read_bytes() == CRLF
    [saved] = json.loads(out)["saved"]
    assert git(repo, "cat-file", "blob", saved["object"]).encode() == CRLF + b"mine\r\n"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["autocrlf", "text-auto"])
def test_recover_restore_puts_a_crlf_file_back(tmp_path: Path, how: str) -> None:
    repo = converting(tmp_path, how)
    ok(repo, "begin", "--task", "t")
    r = wal(repo, "exec", "--", "sh", "-c", r"printf 'three\r\n' >> f.txt",
            env={"GITWAL_CRASH_AT": "after-exec"})
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = wal(repo, "recover", "--restore", "--json")
    assert r.returncode == 0, r.stderr
    [o] = json.loads(r.stdout)["intents"]
    assert o["action"] == "restored", o
    assert (repo / "f.txt").read_bytes() == CRLF


def test_a_checkpoint_commits_gits_form_and_sees_no_unlogged_change(tmp_path: Path) -> None:
    repo = converting(tmp_path, "autocrlf")
    (repo / "g.txt").write_bytes(b"x\r\n")  # untracked, CRLF on disk
    ok(repo, "begin", "--task", "t")
    ok(repo, "exec", "--", "sh", "-c", r"printf 'three\r\n' >> f.txt")
    lines = b"one\ntwo\nthree\n"
    for detached, unlogged in (([], ["g.txt"]), (["--detached"], [])):
        out = json.loads(ok(repo, "checkpoint", *detached, "--include-unlogged", "--json"))
        assert out["unlogged"] == unlogged, out
        commit = out["git"]
        assert git(repo, "cat-file", "blob", f"{commit}:f.txt").encode() == lines
        assert git(repo, "cat-file", "blob", f"{commit}:g.txt").encode() == b"x\n"
        ok(repo, "exec", "--", "sh", "-c", r"printf 'four\r\n' >> f.txt")
        lines += b"four\n"
    assert "ok" in ok(repo, "verify")


def lfs_repo(tmp_path: Path) -> tuple[Path, bytes]:
    if shutil.which("git-lfs") is None:
        pytest.fail("git-lfs is not installed: `make tools` installs it (Debian: git-lfs)",
                    pytrace=False)
    repo = init_repo(tmp_path / "repo")
    git(repo, "lfs", "install", "--local")
    git(repo, "lfs", "track", "*.bin")
    data = os.urandom(4096)
    (repo / "big.bin").write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lfs")
    pointer = git(repo, "cat-file", "-p", "HEAD:big.bin")
    assert pointer.startswith("version https://git-lfs")
    return repo, data


def test_lfs_undo_puts_the_real_binary_back_not_its_pointer(tmp_path: Path) -> None:
    repo, data = lfs_repo(tmp_path)
    ok(repo, "begin", "--task", "t")
    ok(repo, "exec", "--", "sh", "-c", "head -c 5000 /dev/urandom > big.bin")
    ok(repo, "undo")
    assert (repo / "big.bin").read_bytes() == data
    ok(repo, "redo")
    (repo / "big.bin").write_bytes(b"someone else's bytes")
    ok(repo, "undo", "--force")
    assert (repo / "big.bin").read_bytes() == data
    r = wal(repo, "exec", "--", "sh", "-c", "head -c 100 /dev/urandom > big.bin; exit 1")
    assert r.returncode == 1 and (repo / "big.bin").read_bytes() == data, r.stderr
    assert git(repo, "status", "--porcelain") == ""


def test_an_agents_calls_see_no_unlogged_change_in_a_crlf_file(tmp_path: Path) -> None:
    """The hooks compare the base commit (git's form) with snapshots and files
    (the bytes on disk): a CRLF file nobody touched is no unlogged change."""
    from .test_agent_claude import RUN as CLAUDE_RUN
    from .test_agent_claude import pre_post
    from .test_agent_payloads import wal_log

    repo = converting(tmp_path, "autocrlf")
    cmd = {"command": "echo made > made.txt", "description": "make a file"}
    pre_post(repo, "Bash", cmd, "toolu_b",
             lambda: (repo / "made.txt").write_text("made\n"))
    edit = {"file_path": str(repo / "f.txt"), "old_string": "two", "new_string": "2"}
    pre_post(repo, "Edit", edit, "toolu_e",
             lambda: (repo / "f.txt").write_bytes(b"one\r\n2\r\n"))
    records = wal_log(repo, CLAUDE_RUN)
    assert [r for r in records if r["type"] == "unlogged"] == [], records
    assert [r["type"] for r in records if r["type"] in ("commit", "abort")] == ["commit"] * 2
