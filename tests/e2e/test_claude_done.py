"""Done only with proof, with the real Claude Code: its Stop hook refuses to end the
turn, the model gets the reason in its next request, and the turn ends once the
log explains the tree and the user's check passes (docs/agents.md)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .claude import ClaudeCode, cmd, git_wal, make_project, sealed_env
from .fake_api import Block, FakeApi, Request, Text, ToolUse

UNLOGGED = "changed with no logged step explaining them"
CHECK_FAILED = "the project's check"


@dataclass
class ClaimsDone:
    """Says "Done." at once, and acts only on what a Stop hook tells it.

    On its first request a file appears in the tree that no tool call of the
    session made (as when the user saves a file while the model thinks). Told
    that the check fails, it fixes ``a.txt`` with one Edit. Stateless between
    requests, like a model: it reads everything from the request."""

    repo: Path

    def __call__(self, req: Request) -> Sequence[Block]:
        notes = self.repo / "notes.txt"
        if not notes.exists():
            notes.write_text("the user's note\n")
        last = (req.user_texts() or [""])[-1]
        edited = any(u.get("name") == "Edit" for u in req.tool_uses())
        if CHECK_FAILED in last and not edited:
            return [Text("Fixing a.txt."),
                    ToolUse("Edit", {"file_path": str(self.repo / "a.txt"),
                                     "old_string": "broken", "new_string": "fixed"})]
        return [Text("Done.")]


def test_stop_is_refused_until_the_log_explains_the_tree_and_the_check_passes(
        tmp_path: Path, claude_bin: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"a.txt": "broken\n"}, env)
    runs = repo / ".git" / "check-runs"
    cmd(repo, "git", "config", "wal.done.check",
        f"echo run >> {runs}; grep -q fixed a.txt || {{ echo 'a.txt is still broken'; exit 1; }}",
        env=env)
    with FakeApi(ClaimsDone(repo), log_path=tmp_path / "requests.jsonl") as api:
        out = ClaudeCode(claude_bin, tmp_path / "home", api.url).run(
            repo, "Fix a.txt.", session_id=str(uuid.uuid4()))
        assert out.returncode == 0 and out.result["subtype"] == "success", out.stderr
        assert api.errors == []
        main = api.main_requests
    # 1: "Done." at once -> refused: notes.txt changed with no step explaining it.
    # 2: "Done." again -> refused: the check fails on the tree.
    # 3: the Edit that fixes a.txt; 4: "Done." -> the check passes, the turn ends.
    assert len(main) == 4, [r.user_texts()[-1][:200] for r in main]
    told = main[1].user_texts()[-1]
    assert UNLOGGED in told and "(notes.txt)" in told and "do not undo" in told, told
    failed = main[2].user_texts()[-1]
    assert CHECK_FAILED in failed and "a.txt is still broken" in failed, failed
    assert "failed (exit code 1)" in failed and UNLOGGED not in failed, failed
    assert (repo / "a.txt").read_text() == "fixed\n"
    assert (repo / "notes.txt").read_text() == "the user's note\n"  # never undone
    assert len(runs.read_text().splitlines()) == 2  # failed once, passed once
    # The log: the note recorded as unlogged, the Edit committed, nothing open.
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    log = [json.loads(line) for line in git_wal(
        repo, "log", "--json", "--run", rows[0]["run"], env=env).stdout.splitlines()]
    assert any(r["type"] == "unlogged" and r["paths"] == ["notes.txt"] for r in log), log
    [edit] = [r for r in log if r["type"] == "intent"]
    assert edit["status"] == "committed" and edit["target"] == ["a.txt"]
    assert log[-1]["type"] != "intent"
