"""The real Claude Code when gitwal's own PreToolUse hook times out
(docs/agents.md, "When a hook itself fails").

`git wal install claude` with a Claude Code that takes ``"onFailure":
"block"`` on PATH writes it on the handlers that can refuse a call. The
scripted model asks for an Edit while a shell step of the same run holds
the run lock (a `git wal exec` waiting on a FIFO), so gitwal's hook waits
past its timeout: with the key, Claude Code refuses the Edit and the file
keeps its bytes; without it (the control), Claude Code lets the Edit go on
with no intent before it: the gap the key closes.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from .claude import VENV_BIN, ClaudeCode, git_wal, install_gitwal_hooks, make_project, sealed_env
from .fake_api import Block, FakeApi, Request, Text, ToolUse

HOOK_TIMEOUT = 4  # seconds: gitwal's PreToolUse, waiting on the run lock, outlives it


class Held:
    """The model's turn: before it asks for the Edit, a `git wal exec` step of
    the session's run starts and holds the run lock until :meth:`release`."""

    def __init__(self, repo: Path, env: dict[str, str], target: Path) -> None:
        self.repo, self.env, self.target = repo, env, target
        self.started = repo.parent / "started"
        self.release_fifo = repo.parent / "release"
        os.mkfifo(self.started)
        os.mkfifo(self.release_fifo)
        self.proc: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> Sequence[Block]:
        with self.lock:
            if self.proc is None:
                runs = json.loads(git_wal(self.repo, "runs", "--json", env=self.env).stdout)
                [run] = [str(r["run"]) for r in runs if str(r["run"]).startswith("claude-")]
                script = f"echo go > '{self.started}'; cat '{self.release_fifo}' > /dev/null"
                self.proc = subprocess.Popen(
                    [str(VENV_BIN / "git-wal"), "exec", "--run", run, "--", "sh", "-c", script],
                    cwd=self.repo, env=self.env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
                with open(self.started) as gate:  # the command runs: the lock is held
                    assert gate.read().strip() == "go"
                return [ToolUse("Edit", {"file_path": str(self.target), "old_string": "alpha",
                                         "new_string": "ALPHA"})]
        # The Edit's outcome is back: the run's other hooks (its closing, Stop)
        # need the lock now.
        self.release()
        return [Text("Done.")]

    def release(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with open(self.release_fifo, "w") as gate:
            gate.write("done\n")
        _out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err


@pytest.mark.parametrize("block", [True, False], ids=["onFailure-block", "control"])
def test_a_timed_out_gitwal_hook_refuses_the_edit_only_with_on_failure_block(
        tmp_path: Path, claude_bin: Path, block: bool) -> None:
    home = tmp_path / "home"
    env = sealed_env(home)
    repo = make_project(tmp_path / "repo", {"a.txt": "alpha\n"}, env, hooks=None)
    # The install finds the pinned Claude Code on PATH and asks it its version.
    with_claude = {**env, "PATH": f"{claude_bin.parent}{os.pathsep}{env['PATH']}"}
    settings = install_gitwal_hooks(repo, with_claude)
    [group] = settings["hooks"]["PreToolUse"]
    [handler] = group["hooks"]
    assert handler["onFailure"] == "block"
    handler["timeout"] = HOOK_TIMEOUT
    if not block:
        del handler["onFailure"]
    (repo / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")

    held = Held(repo, env, repo / "a.txt")
    try:
        with FakeApi(held, log_path=tmp_path / "requests.jsonl") as api:
            out = ClaudeCode(claude_bin, home, api.url).run(
                repo, "Capitalise alpha.", session_id=str(uuid.uuid4()))
            assert out.returncode == 0, out.stderr
        results = [r for req in api.main_requests for r in req.tool_results()]
    finally:
        held.release()
    assert len(results) == 1, results
    if block:
        assert (repo / "a.txt").read_text() == "alpha\n"  # refused: not written
        assert results[0].get("is_error") is True, results
        # Whatever the timed-out hook left in the log, no step of a.txt is committed.
        runs = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
        [run] = [str(r["run"]) for r in runs if str(r["run"]).startswith("claude-")]
        recs = [json.loads(line) for line in git_wal(
            repo, "log", "--json", "--run", run, env=env).stdout.splitlines()]
        edits = {r["lsn"] for r in recs if r["type"] == "intent" and r["target"] == ["a.txt"]}
        assert not [r for r in recs if r["type"] == "commit" and r["intent"] in edits], recs
    else:
        assert (repo / "a.txt").read_text() == "ALPHA\n"  # went on with the hook timed out
