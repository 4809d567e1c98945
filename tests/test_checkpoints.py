"""Checkpoints, compaction, the gate and drop, through the real CLI."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from gitwal import Wal

from .conftest import git, loose_object, ok, tree_of, wal


def begin_with_steps(repo: Path, n: int = 3) -> str:
    run = ok(repo, "begin", "--task", "t").strip()
    for i in range(n):
        ok(repo, "apply", "ensure-line", f"f{i}.txt", f"line {i}")
    return run


def rows(repo: Path, *extra: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in ok(repo, "log", "--json", *extra).splitlines()]


@pytest.mark.slow
def test_checkpoint_commits_on_the_branch_with_trailers(repo: Path) -> None:
    run = begin_with_steps(repo)
    out = json.loads(ok(repo, "checkpoint", "-m", "three files", "--json"))
    assert out["ref"] == "refs/heads/main" and out["covers"] == 6 and not out["reused_head"]
    assert git(repo, "rev-parse", "HEAD").strip() == out["git"]
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)")
    assert f"Wal-Run: {run}" in trailers and f"Wal-Lsn: {out['lsn']}" in trailers
    assert git(repo, "status", "--porcelain") == ""  # the index followed the branch
    last = rows(repo)[-1]
    assert last["type"] == "checkpoint" and last["git"] == out["git"]
    assert last["tree"] == git(repo, "rev-parse", "HEAD^{tree}").strip()


@pytest.mark.slow
def test_detached_checkpoint_leaves_branch_index_and_tree_alone(repo: Path) -> None:
    run = begin_with_steps(repo)
    head = git(repo, "rev-parse", "HEAD")
    index = (repo / ".git" / "index").read_bytes()
    tree = tree_of(repo)
    out = json.loads(ok(repo, "checkpoint", "--detached", "--json"))
    assert out["ref"] == f"refs/wal-checkpoints/{run}/{out['lsn']}"
    assert git(repo, "rev-parse", out["ref"]).strip() == out["git"]
    assert git(repo, "rev-parse", f"{out['git']}^{{tree}}").strip() == tree
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / ".git" / "index").read_bytes() == index


@pytest.mark.slow
def test_checkpoint_refusals_leave_no_commit_and_no_record(repo: Path) -> None:
    begin_with_steps(repo, 1)
    head = git(repo, "rev-parse", "HEAD")
    n = len(rows(repo))
    (repo / "stray.txt").write_text("nobody logged me\n")
    unlogged = wal(repo, "checkpoint")
    assert unlogged.returncode == 1 and "stray.txt" in unlogged.stderr
    assert "--include-unlogged" in unlogged.stderr
    failing = wal(repo, "checkpoint", "--include-unlogged", "--check", "exit 4")
    assert failing.returncode == 1 and "check failed" in failing.stderr
    assert git(repo, "rev-parse", "HEAD") == head and len(rows(repo)) == n

    assert wal(repo, "apply", "ensure-line", "x.txt", "y",
               env={"GITWAL_CRASH_AT": "after-intent"}).returncode == -signal.SIGKILL
    open_ = wal(repo, "checkpoint", "--include-unlogged")
    assert open_.returncode == 1 and "git wal recover" in open_.stderr
    assert git(repo, "rev-parse", "HEAD") == head

    ok(repo, "recover")
    out = json.loads(ok(repo, "checkpoint", "--include-unlogged", "--json"))
    assert out["unlogged"] == ["stray.txt"]


def test_checkpoint_honours_commit_hooks(repo: Path) -> None:
    begin_with_steps(repo, 1)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'tests must pass first' >&2\nexit 1\n")
    hook.chmod(0o755)
    refused = wal(repo, "checkpoint")
    assert refused.returncode == 1 and "tests must pass first" in refused.stderr
    hook.unlink()
    ok(repo, "checkpoint")


def test_checkpoint_killed_before_its_record_reuses_the_commit(repo: Path) -> None:
    begin_with_steps(repo, 2)
    killed = wal(repo, "checkpoint", env={"GITWAL_CRASH_AT": "checkpoint-after-commit"})
    assert killed.returncode == -signal.SIGKILL
    made = git(repo, "rev-parse", "HEAD").strip()
    assert rows(repo)[-1]["type"] == "commit"  # no checkpoint record yet
    out = json.loads(ok(repo, "checkpoint", "--json"))
    assert out["reused_head"] and out["git"] == made
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"


def test_recover_and_status_read_only_after_the_checkpoint(repo: Path) -> None:
    run = begin_with_steps(repo, 3)
    ok(repo, "checkpoint")
    killed = wal(repo, "apply", "write-file", "f0.txt", "--from", "-",
                 input=b"replaced\n" * 100, env={"GITWAL_CRASH_AT": "mid-write"})
    assert killed.returncode == -signal.SIGKILL
    # Damage a record from before the checkpoint: only a full read notices.
    lsn2 = git(repo, "rev-parse", f"refs/wal/{run}~7:000000000002.json").strip()
    loose_object(repo, lsn2).unlink()
    assert wal(repo, "log").returncode == 1

    status = json.loads(ok(repo, "status", "--json"))
    assert status["checkpoint"] == 8 and status["open"] == [9]
    report = json.loads(ok(repo, "recover", "--json"))
    assert report["checkpoint"] == 8 and report["committed_total"] == 3
    assert report["checkpoint_commit"]["covers"] == 6
    assert [i["outcome"] for i in report["intents"]] == ["torn"]
    assert report["committed"] == []
    assert "Checkpoint: LSN 8" in report["prompt"]


@pytest.mark.slow
def test_compact_needs_a_checkpoint_then_archives_history(repo: Path) -> None:
    run = begin_with_steps(repo, 2)
    refused = wal(repo, "compact")
    assert refused.returncode == 1 and "git wal checkpoint" in refused.stderr
    cp = json.loads(ok(repo, "checkpoint", "--json"))["lsn"]
    ok(repo, "apply", "ensure-line", "after.txt", "x")
    before = rows(repo)
    out = json.loads(ok(repo, "compact", "--json"))
    assert out == {"live_from": cp, "archived": f"refs/wal-archive/{run}/1", "moved": True}
    live = rows(repo)
    assert live[0]["type"] == "checkpoint" and live == before[cp - 1 :]
    assert rows(repo, "--all") == before
    assert json.loads(ok(repo, "compact", "--json"))["moved"] is False
    ok(repo, "recover")
    git(repo, "fsck", "--strict")


@pytest.mark.slow
def test_compact_drop_keeps_no_archive(repo: Path) -> None:
    run = begin_with_steps(repo, 1)
    ok(repo, "checkpoint")
    ok(repo, "compact", "--drop")
    assert git(repo, "for-each-ref", f"refs/wal-archive/{run}") == ""
    assert rows(repo)[0]["type"] == "checkpoint"


@pytest.mark.slow
@pytest.mark.parametrize("point", ["compact-after-rewrite", "compact-after-archive"])
def test_compact_killed_at_each_step_loses_nothing(repo: Path, point: str) -> None:
    run = begin_with_steps(repo, 2)
    ok(repo, "checkpoint")
    ok(repo, "apply", "ensure-line", "after.txt", "x")
    before = rows(repo)
    killed = wal(repo, "compact", env={"GITWAL_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL
    assert rows(repo) == before  # the old chain is still live, whole
    assert rows(repo, "--all") == before
    ok(repo, "compact")
    assert rows(repo, "--all") == before
    archives = git(repo, "for-each-ref", "--format=%(refname)", f"refs/wal-archive/{run}")
    assert archives.split() == [f"refs/wal-archive/{run}/1"]


@pytest.mark.slow
def test_gate_outcomes(repo: Path) -> None:
    assert wal(repo, "gate").returncode == 0  # no run at all
    ok(repo, "begin")
    assert wal(repo, "gate").returncode == 0  # nothing committed yet
    ok(repo, "apply", "ensure-line", "a.txt", "x")
    pending = wal(repo, "gate", "--json")
    assert pending.returncode == 3
    assert "git wal checkpoint" in json.loads(pending.stdout)["reason"]
    assert wal(repo, "apply", "ensure-line", "a.txt", "y",
               env={"GITWAL_CRASH_AT": "after-intent"}).returncode == -signal.SIGKILL
    open_ = wal(repo, "gate", "--auto-checkpoint")
    assert open_.returncode == 3 and "git wal recover" in open_.stderr
    ok(repo, "recover")
    (repo / "stray.txt").write_text("x\n")
    refused = wal(repo, "gate", "--auto-checkpoint")
    assert refused.returncode == 3 and "stray.txt" in refused.stderr
    (repo / "stray.txt").unlink()
    auto = json.loads(ok(repo, "gate", "--auto-checkpoint", "--json"))
    assert auto["safe"] and auto["checkpointed"]["ref"] == "refs/heads/main"
    assert json.loads(ok(repo, "gate", "--json"))["safe"]


@pytest.mark.slow
def test_drop_archives_then_deletes(repo: Path) -> None:
    run = begin_with_steps(repo, 1)
    ok(repo, "exec", "--", "true")  # a snapshot: the run gets a scratch index
    scratch = repo / ".git" / "wal" / "index" / run
    assert scratch.is_file()
    before = rows(repo)
    ok(repo, "drop", run)
    assert not scratch.exists()  # the run's cache goes with it
    assert git(repo, "for-each-ref", f"refs/wal/{run}") == ""
    assert rows(repo, "--all", "--run", run) == before
    missing = wal(repo, "status")
    assert missing.returncode == 1 and "git wal begin" in missing.stderr
    assert Wal(repo).runs() == []


def record_unlogged(repo: Path, run: str, path: str) -> None:
    """What an agent hook writes when it notices a change nobody logged."""
    from gitwal.base.ids import ABSENT, Lsn, RunId
    from gitwal.log.store import Ref, Store
    from gitwal.records.model import Unlogged
    from gitwal.worktree.tree import blob_id

    w = Wal(repo)
    store = Store(w.repo, RunId(run))
    with store.locked():
        head = store.head()
        last = store.head_records(head)[-1] if head else None
        assert last is not None
        observed = blob_id((repo / path).read_bytes())
        w.repo.create_blob((repo / path).read_bytes())
        store.append([Unlogged(RunId(run), Lsn(last.lsn + 1), (path,), (ABSENT,), (observed,),
                               "test")], [Ref(observed)], head)


@pytest.mark.slow
def test_checkpoint_takes_recorded_unlogged_changes_without_the_flag(repo: Path) -> None:
    run = begin_with_steps(repo, 1)
    (repo / "seen.txt").write_text("made by hand, then noticed\n")
    record_unlogged(repo, run, "seen.txt")
    (repo / "unseen.txt").write_text("made by hand, never noticed\n")
    refused = wal(repo, "checkpoint", "--detached")
    assert refused.returncode == 1
    assert "1 path(s) changed that no committed step explains: unseen.txt" in refused.stderr
    (repo / "unseen.txt").unlink()
    (repo / "seen.txt").write_text("changed again after it was noticed\n")
    refused = wal(repo, "checkpoint", "--detached")  # the record saw another content
    assert "explains: seen.txt" in refused.stderr
    (repo / "seen.txt").write_text("made by hand, then noticed\n")
    out = json.loads(ok(repo, "checkpoint", "--detached", "--json"))
    assert out["unlogged"] == ["seen.txt"]  # listed in the record all the same
    assert rows(repo)[-1]["unlogged"] == ["seen.txt"]
    assert json.loads(ok(repo, "verify", "--json"))["ok"]
