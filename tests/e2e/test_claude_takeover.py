"""The real Claude Code's run taken over on another machine (docs/remote-runs.md,
"Taking a run over"; docs/e2e.md, scenario g).

Machine A (a clone and a home of its own) runs a session with `wal.remote` and
commit durability; its Edit of the fifth file is held after gitwal's
PreToolUse, every process of the machine is SIGKILLed, its clone and home
deleted. Machine B, a fresh clone with a fresh home, runs `git wal resume`
and then `claude --resume` on a copy of the session's transcript taken before
the kill (as a synced `~/.claude` would hold it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..conftest import wait_exit
from ..gitservers import HttpGitServer
from ..test_resume import processes_in
from .agents import RenameAgent, edit_results, rename_files, renamed
from .claude import (
    ClaudeCode,
    cmd,
    git_wal,
    hooks_settings,
    make_project,
    sealed_env,
    sigkill,
    wait_until,
    write_settings,
)
from .fake_api import Block, FakeApi, Request
from .hook_helpers import command, stop_gate
from .test_claude_code import PROMPT, WAIT, closing, committed_per_path, tree_files

N_FILES = 8
KILL_AT = 5  # the Edit held with its intent open: files 1-4 are committed before it


def kill_machine(*dirs: Path) -> None:
    """SIGKILL every process working in ``dirs`` and wait until each is gone."""
    for pid in processes_in(*dirs):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        wait_exit(pid)


def project_dir(home: Path, repo: Path) -> Path:
    """Where Claude Code keeps the transcripts of sessions run in ``repo``."""
    return home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(repo))


def log_of(repo: Path, run: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git_wal(repo, "log", "--json", "--run", run, env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def committed_paths(recs: list[dict[str, Any]]) -> list[str]:
    """The paths of the committed intents, in log order."""
    closed = closing(recs)
    return [p for r in recs if r["type"] == "intent"
            and closed.get(r["lsn"], {}).get("type") == "commit" for p in r["target"]]


def open_on(recs: list[dict[str, Any]], path: str) -> bool:
    closed = closing(recs)
    return any(r["type"] == "intent" and r["target"] == [path] and r["lsn"] not in closed
               for r in recs)


def drop_status(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "status"}


def ref_of(repo: Path, ref: str, env: dict[str, str]) -> str | None:
    return cmd(repo, "git", "for-each-ref", "--format=%(objectname)", ref,
               env=env).stdout.strip() or None


def replicated(repo: Path, env: dict[str, str]) -> None:
    cmd(repo, "git", "config", "wal.remote", "origin", env=env)
    cmd(repo, "git", "config", "wal.remote.durability", "commit", env=env)
    cmd(repo, "git", "config", "wal.remote.linger", "2", env=env)


@dataclass
class Model:
    """The one scripted model both machines talk to (tool_use ids stay unique
    across the session, as the real API's are), playing ``agent``."""

    agent: RenameAgent

    def __call__(self, req: Request) -> Sequence[Block]:
        return self.agent(req)


@dataclass(frozen=True)
class Lost:
    """What machine A left: its log as the kill left it (read before the clone
    was deleted), its last head, and the copy of its session's transcript."""

    records: list[dict[str, Any]]
    head: str
    transcript: Path


def run_and_lose_machine_a(tmp_path: Path, claude_bin: Path, api: FakeApi, model: Model,
                           url: str, bare: Path, sid: str) -> Lost:
    """Machine A's session, held at the Edit of the KILL_AT-th file with its intent
    open (on the remote too); then every process of the machine SIGKILLed and its
    clone and home deleted."""
    home, repo = tmp_path / "a-home", tmp_path / "a"
    env = sealed_env(home)
    run, files, plan = f"claude-{sid}", model.agent.files, model.agent.plan
    ref, victim = f"refs/wal/{run}", plan[KILL_AT - 1]
    make_project(repo, files, env)
    cmd(repo, "git", "remote", "add", "origin", url, env=env)
    cmd(repo, "git", "push", "-q", "origin", "main", env=env)
    replicated(repo, env)
    entered = tmp_path / "gate-entered"
    write_settings(repo, hooks_settings(
        {"PreToolUse": command("gate", victim, str(entered))}, matcher="Edit"),
        "settings.local.json")
    synced = tmp_path / "synced-transcript.jsonl"
    model.agent = RenameAgent(repo, dict(files), plan)
    proc = ClaudeCode(claude_bin, home, api.url).start(
        repo, PROMPT, session_id=sid, log=tmp_path / "a-claude.log")
    try:
        wait_until(entered.exists, WAIT, f"the Edit of {victim} at PreToolUse", proc)
        wait_until(lambda: open_on(log_of(repo, run, env), victim)
                   and len(committed_paths(log_of(repo, run, env))) == KILL_AT - 1,
                   WAIT, f"gitwal's intent for {victim}, the Edits before it committed", proc)
        # Commit durability put each commit on the remote before its hook ended;
        # the open intent follows in the background: waited for.
        wait_until(lambda: ref_of(bare, ref, env) == ref_of(repo, ref, env), WAIT,
                   "machine A's log on the remote", proc)
        # The transcript as a synced ~/.claude holds it at this moment.
        [transcript] = (home / ".claude" / "projects").glob(f"*/{sid}.jsonl")
        assert transcript.parent == project_dir(home, repo), transcript
        shutil.copyfile(transcript, synced)
    finally:
        sigkill(proc)
        stop_gate(entered)
        kill_machine(repo, home)
    records = log_of(repo, run, env)
    head = ref_of(repo, ref, env)
    assert head is not None
    shutil.rmtree(repo)
    shutil.rmtree(home)
    return Lost(records, head, synced)


def test_a_killed_sessions_run_goes_on_in_a_fresh_clone_with_claude_resume(
        tmp_path: Path, claude_bin: Path, http_git_server: HttpGitServer) -> None:
    files = rename_files(N_FILES)
    plan = sorted(p for p in files if p.startswith("src/f"))
    victim = plan[KILL_AT - 1]
    bare = http_git_server.add_bare("project.git")
    url = http_git_server.url("project.git")
    sid = str(uuid.uuid4())
    run = f"claude-{sid}"
    ref = f"refs/wal/{run}"
    home_b, repo_b = tmp_path / "b-home", tmp_path / "b"
    env_b = sealed_env(home_b)
    model = Model(RenameAgent(repo_b, files, plan))
    with FakeApi(model, log_path=tmp_path / "requests.jsonl") as api:
        lost = run_and_lose_machine_a(tmp_path, claude_bin, api, model, url, bare, sid)
        # What machine A reported committed: the Edits before the held one (the
        # ones whose success Claude Code showed the model), all on the remote,
        # whose head is machine A's last one; the held one open.
        printed = committed_paths(lost.records)
        assert printed == plan[:KILL_AT - 1] and open_on(lost.records, victim), lost
        shown = [Path(p).relative_to(tmp_path / "a").as_posix()
                 for p, rs in edit_results(api.main_requests).items()
                 if any(not r.get("is_error") for r in rs)]
        assert sorted(shown) == printed, shown
        assert ref_of(bare, ref, env_b) == lost.head
        first_seq = len(api.requests)

        # -- machine B: a fresh clone takes the run over --------------------------
        try:
            cmd(tmp_path, "git", "clone", "-q", url, str(repo_b), env=env_b)
            settings = (repo_b / ".claude" / "settings.json").read_text()
            replicated(repo_b, env_b)
            doc = json.loads(git_wal(repo_b, "resume", run, "--remote", "origin", "--json",
                                     env=env_b).stdout)
            assert doc["taken_from"] == lost.head, doc
            assert doc["closed"]["target"] == [victim], doc
            assert doc["closed"]["outcome"] == "not-applied", doc
            assert sorted(doc["written"]) == printed, doc
            assert tree_files(repo_b) == {**renamed(files, printed),
                                          ".claude/settings.json": settings}

            # The session goes on here: its transcript, synced, under this clone's path.
            project_dir(home_b, repo_b).mkdir(parents=True)
            shutil.copyfile(lost.transcript, project_dir(home_b, repo_b) / f"{sid}.jsonl")
            model.agent = RenameAgent(repo_b, files, plan)
            out = ClaudeCode(claude_bin, home_b, api.url).run(
                repo_b, "continue", resume=sid, timeout=300)
            assert out.returncode == 0 and out.result["subtype"] == "success", out.stderr
            assert api.errors == []
            resumed = [r for r in api.main_requests if r.seq >= first_seq]
            edits = [u for u in api.emitted if u.name == "Edit"]

            # The model got gitwal's resume prompt; it names the Edit that did not land.
            text = resumed[0].all_text()
            assert model.agent.resumes[0] == (resumed[0].seq, KILL_AT - 1), text[-3000:]
            action = [ln for ln in text.splitlines() if ln.startswith("Action:")][-1]
            assert victim in action and "with your Edit tool" in action, action
            # The model asked for each Edit once, twice only for the held one: once on
            # machine A (never run), once on machine B.
            asked = [Path(str(u.input["file_path"])).relative_to(
                tmp_path / ("a" if i < KILL_AT else "b")).as_posix()
                for i, u in enumerate(edits)]
            assert asked == [*plan[:KILL_AT], *plan[KILL_AT - 1:]], asked

            # The resumed session went on with its run (same session id): no other
            # run began here. The log: every plan step committed once, nothing
            # open; all of it on the remote, one chain from machine A's head
            # through the takeover.
            runs = json.loads(git_wal(repo_b, "runs", "--json", env=env_b).stdout)
            assert [r["run"] for r in runs] == [run], runs
            recs = log_of(repo_b, run, env_b)
            # Machine A's records, unchanged (an intent's "status" is what the log
            # says of it now: the open one is aborted).
            assert [drop_status(r) for r in recs[:len(lost.records)]] == [
                drop_status(r) for r in lost.records]
            assert committed_per_path(recs) == dict.fromkeys(plan, 1)
            assert recs[-1]["type"] != "intent"
            [takeover] = [r for r in recs if r["type"] == "takeover"]
            assert takeover["taken"] == lost.head, takeover
            wait_until(lambda: ref_of(bare, ref, env_b) == ref_of(repo_b, ref, env_b), WAIT,
                       "machine B's log on the remote")
            cmd(bare, "git", "merge-base", "--is-ancestor", lost.head, ref, env=env_b)
            git_wal(repo_b, "verify", "--remote", "origin", "--run", run, env=env_b)
            fetched = tmp_path / "fetched"
            cmd(tmp_path, "git", "clone", "-q", url, str(fetched), env=env_b)
            git_wal(fetched, "fetch", "--run", run, env=env_b)
            assert log_of(fetched, run, env_b) == recs
        finally:
            kill_machine(repo_b, home_b)

    # The tree is byte-identical to the one an uninterrupted session leaves.
    home_c, repo_c = tmp_path / "c-home", tmp_path / "c"
    env_c = sealed_env(home_c)
    cmd(tmp_path, "git", "clone", "-q", url, str(repo_c), env=env_c)
    with FakeApi(RenameAgent(repo_c, files, plan)) as api:
        straight = ClaudeCode(claude_bin, home_c, api.url).run(repo_c, PROMPT, timeout=300)
        assert straight.returncode == 0 and api.errors == [], straight.stderr
    assert tree_files(repo_b) == tree_files(repo_c) == {
        **renamed(files, plan), ".claude/settings.json": settings}
