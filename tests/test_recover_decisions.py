"""Recovery decisions that need no crash loop: in-doubt shell steps, drift,
a run held by a live process, the plan's remaining steps, and the user's index."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from gitwal import Wal

from .conftest import git, ok, tree_of, wal

EXEC_TWO_FILES = ["exec", "--", "sh", "-c", "echo one > one.txt; echo two > README"]


def test_in_doubt_exec_exits_3_lists_paths_and_restores_only_with_restore(repo: Path) -> None:
    ok(repo, "begin")
    before = tree_of(repo)
    killed = wal(repo, *EXEC_TWO_FILES, env={"GITWAL_CRASH_AT": "after-exec"})
    assert killed.returncode == -signal.SIGKILL

    first = wal(repo, "recover", "--json")
    assert first.returncode == 3, first.stderr
    item = json.loads(first.stdout)["intents"][0]
    assert (item["outcome"], item["open"]) == ("in-doubt", True)
    assert item["changed"] == ["README", "one.txt"]
    assert (repo / "one.txt").exists(), "recover without --restore must not touch the tree"
    refused = wal(repo, "apply", "ensure-line", "x.txt", "y")
    assert refused.returncode == 1 and "still open" in refused.stderr

    second = wal(repo, "recover", "--restore", "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["intents"][0]["action"] == "restored"
    assert tree_of(repo) == before
    assert Wal(repo).status().open == ()


def test_drift_of_a_committed_path_is_reported_not_repaired(repo: Path) -> None:
    ok(repo, "begin")
    ok(repo, "apply", "ensure-line", "README", "added")
    (repo / "README").write_text("someone else wrote this\n")
    report = json.loads(ok(repo, "recover", "--json"))
    assert [d["path"] for d in report["drift"]] == ["README"]
    assert (repo / "README").read_text() == "someone else wrote this\n"
    assert "Drift: README" in report["prompt"]


def test_recover_refuses_while_a_live_process_holds_the_run(repo: Path) -> None:
    ok(repo, "begin")
    run = Wal(repo).run()
    with run.store.locked():
        busy = wal(repo, "recover")
    assert busy.returncode == 1
    assert "in use by another live gitwal process" in busy.stderr


def test_remaining_steps_follow_the_step_each_intent_names(repo: Path) -> None:
    ok(repo, "begin", "--task", "t", "--step", "a", "--step", "b", "--step", "c")
    ok(repo, "apply", "--step", "1", "ensure-line", "a", "x")
    ok(repo, "apply", "--step", "1", "ensure-line", "a", "x")  # a no-op repeat
    ok(repo, "apply", "--step", "3", "ensure-line", "c", "x")
    report = json.loads(ok(repo, "recover", "--json"))
    assert report["remaining_steps"] == [{"step": 2, "text": "b"}]
    assert "continue with plan step 2: b" in report["prompt"]


def test_steps_never_touch_the_index_or_unnamed_untracked_files(repo: Path) -> None:
    (repo / "scratch.txt").write_text("mine\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    index = (repo / ".git" / "index").read_bytes()
    ok(repo, "begin")
    ok(repo, "apply", "ensure-line", "README", "x")
    ok(repo, "apply", "move-file", "staged.txt", "moved.txt")
    ok(repo, "exec", "--", "sh", "-c", "echo built > out.txt")
    ok(repo, "recover")
    assert (repo / ".git" / "index").read_bytes() == index
    assert (repo / "scratch.txt").read_text() == "mine\n"
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]


def test_failed_check_aborts_restores_and_keeps_the_output(repo: Path) -> None:
    ok(repo, "begin")
    before = (repo / "README").read_bytes()
    proc = wal(repo, "apply", "--check", "echo broken >&2; exit 1", "ensure-line", "README", "x")
    assert proc.returncode == 1 and "aborted: check failed" in proc.stderr
    assert (repo / "README").read_bytes() == before
    rows = [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]
    assert rows[-1]["type"] == "abort" and "broken" in rows[-1]["output"]
    assert rows[-1]["restored"] == ["README"]
