"""The harness itself, against the real Claude Code CLI with hand-written hooks:
the scripted API drives real tool calls, hooks see the scripted tool_use ids,
and after a SIGKILL between PreToolUse and the tool, a resumed session cannot
tell from its transcript whether the call took effect (which is what gitwal's
resume prompt is for)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.conftest import init_repo

from .agents import RenameAgent, edit_results, is_interrupted, rename_files, renamed
from .claude import ClaudeCode, hooks_settings, sigkill, wait_until, write_settings
from .fake_api import FakeApi, Request, Text
from .hook_helpers import command, stop_gate


def test_scripted_edits_reach_the_hooks_with_their_tool_use_ids(
        tmp_path: Path, claude_bin: Path) -> None:
    files = rename_files(3)
    plan = sorted(p for p in files if p.startswith("src/f"))
    repo = tmp_path / "repo"
    record = tmp_path / "hooks.jsonl"
    write_settings(repo, hooks_settings({
        e: command("record", str(record))
        for e in ("PreToolUse", "PostToolUse", "SessionStart")}))
    init_repo(repo, files)
    with FakeApi(RenameAgent(repo, files, plan)) as api:
        out = ClaudeCode(claude_bin, tmp_path / "home", api.url).run(repo, "rename")
        emitted = [u.id for u in api.emitted]
        results = edit_results(api.main_requests)
        assert api.errors == []
    assert out.returncode == 0 and out.result["subtype"] == "success", out.stderr
    assert len(emitted) == 3
    events = [json.loads(line) for line in record.read_text().splitlines()]
    assert events[0]["hook_event_name"] == "SessionStart"
    for event in ("PreToolUse", "PostToolUse"):
        assert [e["tool_use_id"] for e in events if e["hook_event_name"] == event] == emitted
    assert sorted(results) == [str(repo / p) for p in plan]
    for p, text in renamed(files, plan).items():
        assert (repo / p).read_text() == text


def test_after_a_kill_the_transcript_cannot_tell_what_took_effect(
        tmp_path: Path, claude_bin: Path) -> None:
    """Killed while the Edit of f02 waits in PreToolUse: f01 is renamed, f02 is not.
    The resumed session's transcript ends with a call "of unknown outcome":
    f02's, or even f01's, whose result Claude Code had not yet written down; or
    it ends with f01's, done, and has lost f02's pending call altogether."""
    files = rename_files(3)
    plan = sorted(p for p in files if p.startswith("src/f"))
    repo = tmp_path / "repo"
    entered = tmp_path / "gate-entered"
    write_settings(repo, hooks_settings(
        {"PreToolUse": command("gate", "f02.ts", str(entered))}, matcher="Edit"))
    init_repo(repo, files)
    sid = str(uuid.uuid4())
    with FakeApi(RenameAgent(repo, files, plan)) as api:
        cc = ClaudeCode(claude_bin, tmp_path / "home", api.url)
        proc = cc.start(repo, "rename", session_id=sid, log=tmp_path / "first.log")
        try:
            wait_until(entered.exists, 60, "the PreToolUse gate for f02.ts", proc)
        finally:
            sigkill(proc)
            stop_gate(entered)
        emitted = [u.id for u in api.emitted]

    def stop(req: Request) -> list[Text]:
        return [Text("stopping")]

    with FakeApi(stop) as api2:
        out = ClaudeCode(claude_bin, tmp_path / "home", api2.url).run(
            repo, "continue", resume=sid)
        first = api2.main_requests[0]
    assert out.returncode == 0, out.stderr
    assert (repo / "src/f01.ts").read_text() == renamed(files, plan)["src/f01.ts"]
    assert (repo / "src/f02.ts").read_text() == files["src/f02.ts"]
    assert len(emitted) == 2
    transcript = json.dumps(first.messages)[-3000:]
    last_use = first.tool_uses()[-1]
    assert last_use["id"] in emitted, transcript
    [cut] = [r for r in first.tool_results() if r["tool_use_id"] == last_use["id"]]
    if not is_interrupted(cut):
        # Or Claude Code had not written f02's call down at all: the transcript
        # ends with f01's, done, and says nothing of the call that was pending.
        assert last_use["id"] == emitted[0], transcript
        assert emitted[1] not in [u["id"] for u in first.tool_uses()], transcript
