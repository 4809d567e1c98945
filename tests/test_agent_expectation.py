"""The log's expectation of the tree (gitwal/agents/expectation.py) says what it
wants appended and appends nothing itself: the caller's batch is the only one."""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitwal import Wal
from gitwal.agents.expectation import Expectation
from gitwal.base.ids import ABSENT, Lsn, RunId
from gitwal.records.model import Abort, Intent, Unlogged

from .conftest import git
from .test_agent_payloads import claude_run, claude_tool, run_hook

RUN = RunId(claude_run())
REF = f"refs/wal/{RUN}"


def blob(data: str) -> str:
    return str(pygit2.hash(data.encode()))


def test_notice_returns_the_unlogged_record_and_appends_nothing(repo: Path) -> None:
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write,
                                                "toolu_1")).code == 0
    (repo / "n.txt").write_text("n\n")
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Write", write,
                                                "toolu_1")).code == 0
    (repo / "README").write_text("changed behind the log\n")
    head = git(repo, "rev-parse", REF)
    run = Wal(repo).run(RUN)
    records = run.store.segment()
    [staged] = Expectation(run).notice(records, "a look")
    assert staged.record == Unlogged(RUN, Lsn(records[-1].lsn + 1), ("README",),
                                     (blob("hello\n"),), (blob("changed behind the log\n"),),
                                     "a look")
    assert [r.oid for r in staged.refs] == [blob("changed behind the log\n")]
    assert git(repo, "rev-parse", REF) == head  # nothing was appended
    (repo / "README").write_text("hello\n")
    assert Expectation(run).notice(records, "a look") == []


def test_settle_returns_the_closing_and_what_differs_in_lsn_order(repo: Path) -> None:
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write,
                                                "toolu_1")).code == 0
    (repo / "n.txt").write_text("neither\n")  # not the post-image: found, not verified
    head = git(repo, "rev-parse", REF)
    run = Wal(repo).run(RUN)
    records = run.store.segment()
    intent = records[-1]
    assert isinstance(intent, Intent)
    abort, unlogged = Expectation(run).settle(records, intent, "no closing hook came")
    assert isinstance(abort.record, Abort) and abort.record.intent == intent.lsn
    assert abort.record.lsn == intent.lsn + 1 and "left as found" in abort.record.reason
    assert isinstance(unlogged.record, Unlogged) and unlogged.record.lsn == intent.lsn + 2
    assert unlogged.record.paths == ("n.txt",) and unlogged.record.expected == (ABSENT,)
    assert git(repo, "rev-parse", REF) == head  # nothing was appended
