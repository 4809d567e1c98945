"""The hook server's background tree check reads the tree without the run
lock (a call arriving meanwhile never waits for that read), and keeps its
look only when nothing was appended since it began."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitwal import Wal
from gitwal.agents.external import External
from gitwal.log.store import Store
from gitwal.run import Run
from gitwal.worktree.snapshot import CHECK
from gitwal.worktree.tree import Worktree

from .test_agent_payloads import claude, claude_run, claude_tool, run_hook, wal_log


def session(repo: Path) -> Run:
    (repo / "a.txt").write_text("one\n")
    edit = {"file_path": str(repo / "a.txt"), "old_string": "one", "new_string": "two"}
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0
    for event in ("PreToolUse", "PostToolUse"):
        if event == "PostToolUse":
            (repo / "a.txt").write_text("two\n")
        assert run_hook(repo, "claude", claude_tool(repo, event, "Edit", edit, "c1")).code == 0
    return Wal(repo).run(claude_run())


def unlogged(repo: Path) -> list[list[str]]:
    return [r["paths"] for r in wal_log(repo, claude_run()) if r["type"] == "unlogged"]


def test_the_tree_is_read_without_the_run_lock_and_a_change_is_recorded(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = session(repo)
    (repo / "b.txt").write_text("made outside any call\n")
    real = Worktree.snapshot
    reads: list[str] = []

    def snapshot(wt: Worktree, rid: str, watch: tuple[str, ...] = (), scratch: str = ""
                 ) -> str:
        # Another process's call may take the run lock now: nobody holds it.
        with Store(run.store.repo, run.id).locked(wait=False):
            reads.append(scratch)
        return str(real(wt, rid, watch, scratch))

    monkeypatch.setattr(Worktree, "snapshot", snapshot)
    before = unlogged(repo)
    External(run, full_check=True).check_quietly("test check")
    assert reads == [CHECK]
    assert unlogged(repo) == [*before, ["b.txt"]]


def test_a_look_overtaken_by_a_call_is_dropped(repo: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    run = session(repo)
    (repo / "b.txt").write_text("made outside any call\n")
    real = Worktree.snapshot

    def snapshot(wt: Worktree, rid: str, watch: tuple[str, ...] = (), scratch: str = ""
                 ) -> str:
        tree = str(real(wt, rid, watch, scratch))
        # A call arrives while the tree is read: it appends, and it looks itself.
        (repo / "c.txt").write_text("x\n")
        write = {"file_path": str(repo / "c.txt"), "content": "y\n"}
        assert run_hook(repo, "claude",
                        claude_tool(repo, "PreToolUse", "Write", write, "c2")).code == 0
        return tree

    monkeypatch.setattr(Worktree, "snapshot", snapshot)
    before = len(wal_log(repo, claude_run()))
    assert External(run, full_check=True).check_quietly("test check").appended == ()
    log = wal_log(repo, claude_run())
    # Only the call's own records: its look at the tree, then its intent.
    assert [r["type"] for r in log[before:]] == ["unlogged", "intent"]
    assert log[before]["noticed"].startswith("claude-code PreToolUse")


def test_one_quiet_check_at_a_time(repo: Path) -> None:
    run = session(repo)
    (repo / "b.txt").write_text("made outside any call\n")
    with run.wt.scratch_lock(run.id, CHECK) as mine:
        assert mine
        assert External(run, full_check=True).check_quietly("test check").appended == ()
    assert External(run, full_check=True).check_quietly("test check").appended != ()
