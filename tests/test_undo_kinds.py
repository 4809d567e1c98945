"""Undo and redo where a path changes kind (docs/undo.md, "A file where a
directory was"): a shell step that swapped a directory and a file, a person
who replaced one with the other since, and a crash in the middle of either.
The whole undo is planned before its intent: what cannot be put back is
refused with nothing written and no intent left open."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, tree_of, wal

# d is a directory that becomes a file, e a file that becomes a directory.
SWAP = "rm -r d; echo D > d; rm e; mkdir e; echo E > e/e"
FILES = {"README": "hello\n", "d/f": "x\n", "d/g": "y\n", "e": "file\n"}


@pytest.fixture
def swapped(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo", FILES)


def head(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(objectname)", "refs/wal/")


def open_intents(repo: Path) -> list[int]:
    return list(json.loads(ok(repo, "status", "--json"))["open"])


def drift(repo: Path) -> list[object]:
    return list(json.loads(ok(repo, "recover", "--json"))["drift"])


def test_a_shell_step_that_swapped_a_directory_and_a_file_is_undone_and_redone(
        swapped: Path) -> None:
    repo = swapped
    ok(repo, "begin")
    base = tree_of(repo)
    ok(repo, "exec", "--", "sh", "-c", SWAP)  # LSN 2
    after = tree_of(repo)
    assert drift(repo) == []  # e is a directory now: the file e is absent, as logged
    # The dry run shows the plan: removals in the way first, deepest first,
    # then the writes, shallowest first.
    dry = json.loads(ok(repo, "undo", "--dry-run", "--json"))
    assert [c["path"] for c in dry["changes"]] == ["e/e", "d", "e", "d/f", "d/g"]
    diff = dry["diff"]
    assert diff.index("b/e/e") < diff.index("b/d\n") < diff.index("b/e\n") < diff.index("b/d/f")
    assert tree_of(repo) == after  # a dry run changes nothing
    ok(repo, "undo")
    assert tree_of(repo) == base
    assert (repo / "d").is_dir() and (repo / "e").read_text() == "file\n"
    assert open_intents(repo) == [] and drift(repo) == []
    redo = json.loads(ok(repo, "redo", "--dry-run", "--json"))
    assert [c["path"] for c in redo["changes"]] == ["d/f", "d/g", "e", "d", "e/e"]
    ok(repo, "redo")
    assert tree_of(repo) == after
    assert (repo / "d").read_text() == "D\n" and (repo / "e").is_dir()
    ok(repo, "undo", "2")
    assert tree_of(repo) == base
    assert open_intents(repo) == [] and drift(repo) == []
    ok(repo, "checkpoint")  # nothing the log does not explain
    verified = wal(repo, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("step", [
    "echo changed > d/f",  # the step changed a file in d: undo writes d/f back
    "rm -r d",  # the step removed d: undo makes it again
])
@pytest.mark.parametrize("force", [False, True])
def test_a_directory_a_person_replaced_with_a_file_refuses_the_undo_up_front(
        swapped: Path, step: str, force: bool) -> None:
    repo = swapped
    ok(repo, "begin")
    ok(repo, "exec", "--", "sh", "-c", step)
    if (repo / "d").exists():
        for child in (repo / "d").iterdir():
            child.unlink()
        (repo / "d").rmdir()
    (repo / "d").write_text("a person's file\n")  # where the directory was
    before, tree = head(repo), tree_of(repo)
    refused = wal(repo, "undo", *(["--force"] if force else []))
    assert refused.returncode == 1, refused.stderr
    assert "error: d/f: d is a file now, where undo needs a directory; nothing was undone" \
        in refused.stderr, refused.stderr
    assert "hint: move d away" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (repo / "d").read_text() == "a person's file\n"  # not theirs to lose
    assert tree_of(repo) == tree and head(repo) == before  # nothing written, nothing logged
    assert open_intents(repo) == []
    dry = wal(repo, "undo", "--dry-run")
    assert dry.returncode == 1 and "d is a file now" in dry.stderr
    # Moved away, the undo goes through (--force: d/f is gone since the step).
    (repo / "d").rename(repo / "mine.txt")
    ok(repo, "undo", "--force")
    assert (repo / "d" / "f").read_text() == "x\n"
    assert wal(repo, "verify").returncode == 0


def test_a_file_a_person_replaced_with_a_directory_refuses_the_undo_up_front(
        swapped: Path) -> None:
    repo = swapped
    ok(repo, "begin")
    ok(repo, "exec", "--", "sh", "-c", "rm e; mkdir e; echo E > e/e")  # e: file -> directory
    ok(repo, "exec", "--", "sh", "-c", "echo more >> README")
    (repo / "e" / "mine").write_text("a person's file\n")  # theirs, in the step's directory
    before, tree = head(repo), tree_of(repo)
    refused = wal(repo, "undo", "--to", "1")
    assert refused.returncode == 1, refused.stderr
    assert "error: e: e is a directory holding e/mine, which undo does not remove; " \
        "nothing was undone" in refused.stderr, refused.stderr
    assert (repo / "e" / "mine").read_text() == "a person's file\n"
    assert tree_of(repo) == tree and head(repo) == before
    assert open_intents(repo) == []
    (repo / "e" / "mine").unlink()
    ok(repo, "undo", "--to", "1")
    assert (repo / "e").read_text() == "file\n" and (repo / "README").read_text() == "hello\n"


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "point"), [
    ("undo", "after-intent"), ("undo", "between-paths"), ("undo", "between-paths:3"),
    ("undo", "after-apply"), ("redo", "between-paths"), ("redo", "between-paths:3")])
@pytest.mark.parametrize("redo_flag", [False, True])
def test_a_swap_undo_killed_mid_way_is_finished_or_reported_cleanly(
        swapped: Path, point: str, tool: str, redo_flag: bool) -> None:
    repo = swapped
    ok(repo, "begin")
    base = tree_of(repo)
    ok(repo, "exec", "--", "sh", "-c", SWAP)
    after = tree_of(repo)
    if tool == "redo":
        ok(repo, "undo")
    killed = wal(repo, tool, env={"GITWAL_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rec = wal(repo, "recover", *(["--redo"] if redo_flag else []), "--json")
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert open_intents(repo) == []
    want = base if tool == "undo" else after
    if tree_of(repo) != want:
        # Closed, not done: what recovery names as the next action goes through.
        assert not redo_flag, rec.stdout
        action = json.loads(rec.stdout)["prompt"].splitlines()[-1]
        assert f"`git wal {tool} --run " in action, action
        ok(repo, tool)
    assert tree_of(repo) == want
    assert open_intents(repo) == []
    verified = wal(repo, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_failing_shell_step_that_swapped_kinds_is_rolled_back(swapped: Path) -> None:
    repo = swapped
    ok(repo, "begin")
    base = tree_of(repo)
    failed = wal(repo, "exec", "--", "sh", "-c", SWAP + "; exit 1")
    assert failed.returncode != 0
    assert "5 changed path(s) restored" in failed.stderr, failed.stderr
    assert tree_of(repo) == base and (repo / "d").is_dir() and (repo / "e").is_file()
    assert open_intents(repo) == []


@pytest.mark.parametrize("point", ["after-exec", "mid-restore"])
def test_recover_restore_puts_back_a_shell_step_that_swapped_kinds(
        swapped: Path, point: str) -> None:
    repo = swapped
    ok(repo, "begin")
    base = tree_of(repo)
    # after-exec: killed before its post snapshot (in doubt, --restore puts it
    # back); mid-restore: killed half-way through rolling a failure back.
    tail = "" if point == "after-exec" else "; exit 1"
    killed = wal(repo, "exec", "--", "sh", "-c", SWAP + tail, env={"GITWAL_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rec = wal(repo, "recover", "--restore")
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert tree_of(repo) == base and (repo / "d").is_dir() and (repo / "e").is_file()
    assert open_intents(repo) == []
