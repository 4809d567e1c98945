"""Two real Claude Code sessions in one repository edit one file at the same time
(docs/agents-together.md): no lost update.

Session 1's Edit of ``shared.txt`` is held mid-step, its intent open, while
session 2 asks for an Edit of the same file: either before the tool ran (a
``gate`` hook beside gitwal's ``PreToolUse``, tests/e2e/hook_helpers.py) or
after it ran, its closing ``PostToolUse`` hook (which Claude Code runs in the
background) held at the test-only pause point ``before-close``
(gitwal/base/crashpoints.py). Session 2's ``PreToolUse`` is refused, and its model is
told which run holds the file. Session 1 is let go and commits; session 2's
model reads the file again and edits it, which now goes through. Every event is
ordered by a fifo, a scripted model's reply or a process's exit, never by time.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .claude import (
    ClaudeCode,
    git_wal,
    hooks_settings,
    make_project,
    sealed_env,
    sigkill,
    wait_until,
    write_settings,
)
from .fake_api import Block, FakeApi, Request, Text, ToolUse
from .hook_helpers import command, release_path, stop_gate

WAIT = 120.0  # seconds for anything a test waits on (a loaded 2-core machine)
BEFORE = "alpha\nbeta\ngamma\n"
ONE = ("alpha\n", "alpha (one)\n")  # session 1's edit
TWO = ("gamma\n", "gamma (two)\n")  # session 2's edit
BUSY = "is being changed by run"  # gitwal's refusal (docs/agents-together.md)


def released(event: threading.Event, what: str) -> None:
    """Block a scripted reply until the test lets it go (a script that raises
    is answered with an error, which fails the session and so the test)."""
    if not event.wait(WAIT):
        raise TimeoutError(f"the test never released {what}")


def last_result(req: Request) -> tuple[str, dict[str, Any]] | None:
    """The newest tool result of the transcript, with the name of its tool."""
    names = {u["id"]: str(u.get("name")) for u in req.tool_uses()}
    results = req.tool_results()
    if not results:
        return None
    return names.get(str(results[-1].get("tool_use_id")), ""), results[-1]


def result_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def edit(path: Path, change: tuple[str, str]) -> ToolUse:
    return ToolUse("Edit", {"file_path": str(path), "old_string": change[0],
                            "new_string": change[1]})


@dataclass
class First:
    """Session 1: one Edit, then "Done." once the test lets it go (its reply
    is held so that its turn does not end, and its ``Stop`` hook does not
    settle the step, while session 2 works)."""

    path: Path
    go_on: threading.Event

    def __call__(self, req: Request) -> Sequence[Block]:
        if last_result(req) is None:
            return [Text("Editing the first line."), edit(self.path, ONE)]
        released(self.go_on, "session 1's last reply")
        return [Text("Done.")]


@dataclass
class Second:
    """Session 2: an Edit; told the file is busy, it waits for the test, reads
    the file again and makes its Edit on what it read. Stateless between
    requests, like a model: it acts on the newest tool result alone."""

    path: Path
    go_on: threading.Event

    def __call__(self, req: Request) -> Sequence[Block]:
        last = last_result(req)
        if last is None:
            return [Text("Editing the last line."), edit(self.path, TWO)]
        tool, result = last
        text = result_text(result)
        if tool == "Edit" and result.get("is_error"):
            if BUSY not in text:
                raise ValueError(f"the Edit failed for another reason: {text}")
            released(self.go_on, "session 2's retry")
            return [Text("Another run is changing it; reading it again."),
                    ToolUse("Read", {"file_path": str(self.path)})]
        if tool == "Read":
            if ONE[1].strip() not in text:
                raise ValueError(f"the file read again lacks session 1's edit: {text}")
            return [Text("Editing the last line again."), edit(self.path, TWO)]
        if tool == "Edit":
            return [Text("Done.")]
        raise ValueError(f"unexpected tool result of {tool}: {text}")


def reader_at(fifo: Path, held: list[int]) -> bool:
    """Whether a process waits at ``fifo`` (GITWAL_PAUSE_AT); if so, keep it there:
    the write end opened here is held in ``held`` until the test closes it."""
    try:
        held.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: nobody has opened it to read yet
            raise
        return False
    return True


def open_gate(entered: Path) -> None:
    """Let the gate hook waiting at ``entered`` end normally (exit 0)."""
    fd = os.open(release_path(entered), os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


def records(repo: Path, run: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git_wal(repo, "log", "--json", "--run", run, env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def intents(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every intent, with ``closed_by``: the record that closed it (or None)."""
    closing = {r["intent"]: r for r in recs if r["type"] in ("commit", "abort")}
    return [{**r, "closed_by": closing.get(r["lsn"])} for r in recs if r["type"] == "intent"]


def run_exists(repo: Path, run: str, env: dict[str, str]) -> bool:
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    return any(r["run"] == run for r in rows)


def transcript(home: Path, session: str) -> str:
    """Claude Code's own transcript of ``session`` (under the private HOME)."""
    [path] = (home / ".claude" / "projects").glob(f"*/{session}.jsonl")
    return path.read_text()


@pytest.mark.parametrize("held", ["before-the-tool", "before-the-commit"])
def test_two_sessions_on_one_file_no_lost_update(
        tmp_path: Path, claude_bin: Path, held: str) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"shared.txt": BEFORE, "other.txt": "x\n"}, env)
    shared = repo / "shared.txt"
    fifo, entered = tmp_path / "hold-1", tmp_path / "gate-entered"
    sid1, sid2 = str(uuid.uuid4()), str(uuid.uuid4())
    run1, run2 = f"claude-{sid1}", f"claude-{sid2}"
    go_on1, go_on2 = threading.Event(), threading.Event()
    held_fds: list[int] = []
    if held == "before-the-tool":
        # Both sessions read this settings file; only session 1's Edit names ONE[1].
        write_settings(repo, hooks_settings(
            {"PreToolUse": command("gate", ONE[1].strip(), str(entered))}, matcher="Edit"),
            "settings.local.json")
        extra: dict[str, str] = {}
        at_hold = BEFORE
    else:
        # Session 1's hooks run in its own processes (not the shared hook server,
        # which never inherits GITWAL_PAUSE_AT), so the pause holds its step alone.
        os.mkfifo(fifo)
        extra = {"GITWAL_NO_SERVER": "1", "GITWAL_PAUSE_AT": f"before-close:{fifo}"}
        at_hold = BEFORE.replace(*ONE)

    def step1_open() -> bool:
        recs = records(repo, run1, env) if run_exists(repo, run1, env) else []
        return bool(recs) and recs[-1]["type"] == "intent" and recs[-1]["target"] == [
            "shared.txt"]

    # One scripted model per session, so that holding one's reply holds nothing else.
    with FakeApi(First(shared, go_on1), log_path=tmp_path / "requests-1.jsonl") as api1, \
            FakeApi(Second(shared, go_on2), log_path=tmp_path / "requests-2.jsonl") as api2:
        cc1 = ClaudeCode(claude_bin, tmp_path / "home-1", api1.url, env=extra)
        cc2 = ClaudeCode(claude_bin, tmp_path / "home-2", api2.url)
        proc1 = cc1.start(repo, "Edit the first line of shared.txt.", session_id=sid1,
                          log=tmp_path / "session-1.log")
        proc2 = None
        try:
            if held == "before-the-tool":
                wait_until(entered.exists, WAIT, "session 1's Edit at the gate", proc1)
            else:
                wait_until(lambda: reader_at(fifo, held_fds), WAIT,
                           "session 1's PostToolUse at before-close", proc1)
            # Session 1's intent is open, the newest record of its run.
            wait_until(step1_open, WAIT, "session 1's intent", proc1)
            assert shared.read_text() == at_hold

            proc2 = cc2.start(repo, "Edit the last line of shared.txt.", session_id=sid2,
                              log=tmp_path / "session-2.log")
            # Session 2's Edit is refused at PreToolUse: its model's next request
            # carries the refusal, naming session 1's run.
            assert api2.wait_for(lambda rs: any(
                r.is_main and r.tool_results() for r in rs), WAIT), "no retry request"
            [refused] = [r for r in api2.main_requests if r.tool_results()]
            [result] = refused.tool_results()
            told = result_text(result)
            assert result.get("is_error") and f"shared.txt {BUSY} {run1}" in told, told
            assert "so this call was refused (nothing was changed)" in told, told
            assert "read the file again and retry" in told, told
            assert shared.read_text() == at_hold  # session 2 wrote nothing
            assert intents(records(repo, run2, env)) == []  # and logged no intent
            assert step1_open()

            # Let session 1 go on: it commits; then its turn ends.
            if held == "before-the-tool":
                open_gate(entered)
            else:
                os.close(held_fds.pop())
            wait_until(lambda: intents(records(repo, run1, env))[0]["closed_by"] is not None,
                       WAIT, "session 1's commit", proc1)
            go_on1.set()
            assert proc1.wait(WAIT) == 0, (tmp_path / "session-1.log").read_text()
            # Session 2 reads the file again and edits it: now it goes through.
            go_on2.set()
            assert proc2.wait(WAIT) == 0, (tmp_path / "session-2.log").read_text()
        finally:
            go_on1.set()
            go_on2.set()
            stop_gate(entered)
            for fd in held_fds:
                os.close(fd)
            for proc in (proc1, proc2):
                if proc is not None and proc.poll() is None:
                    sigkill(proc)
        assert api1.errors == [] and api2.errors == [], (api1.errors, api2.errors)
        main2 = api2.main_requests

    # Session 2's model made two Edits, the first refused, the second done; its
    # transcript (Claude Code's own) holds the refusal naming session 1's run.
    assert [u.name for u in api2.emitted] == ["Edit", "Read", "Edit"]
    done = last_result(main2[-1])
    assert done is not None and done[0] == "Edit" and not done[1].get("is_error"), done
    assert f"{BUSY} {run1}" in transcript(tmp_path / "home-2", sid2)

    # No lost update: the file holds both edits, each committed by its own run,
    # session 2's from what session 1's left.
    assert shared.read_text() == BEFORE.replace(*ONE).replace(*TWO)
    [step1] = intents(records(repo, run1, env))
    [step2] = intents(records(repo, run2, env))
    for step in (step1, step2):
        assert step["target"] == ["shared.txt"] and step["closed_by"]["type"] == "commit"
        assert step["closed_by"]["verified"].startswith("hash==post"), step
    assert step2["pre"] == step1["post"]

    # Both logs verify; one order of both runs' steps, no conflict, whose replay
    # gives the tree.
    git_wal(repo, "verify", "--all", env=env)
    order = json.loads(git_wal(repo, "order", "--json", env=env).stdout)
    assert order["ok"] and order["conflicts"] == [] and order["replay_differs"] == [], order
    steps = [(s["run"], s["lsn"]) for s in order["steps"] if "shared.txt" in s["paths"]]
    assert steps == [(run1, step1["lsn"]), (run2, step2["lsn"])], order
