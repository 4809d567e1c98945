"""The real Claude Code CLI with gitwal's hooks (`git wal install claude`).

Real repositories in temp dirs, real `claude` processes, real SIGKILLs; only
the model is scripted (tests/e2e/fake_api.py). docs/e2e.md describes the
harness.
"""

from __future__ import annotations

import errno
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from .agents import (
    NEW,
    OLD,
    RenameAgent,
    Steps,
    bash,
    edit_results,
    is_interrupted,
    rename_files,
    renamed,
)
from .claude import (
    VENV_BIN,
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
from .fake_api import FakeApi, Request, ToolUse
from .hook_helpers import command, stop_gate

N_FILES = int(os.environ.get("GITWAL_E2E_FILES", "40"))
# The Edit killed between PreToolUse and the tool: the 23rd of 40.
KILL_AT = max(1, N_FILES * 23 // 40)
WAIT = 120.0  # seconds for anything a test waits on (a loaded 2-core machine)
PROMPT = f"Rename {OLD} to {NEW} everywhere under src/, one file at a time."


# -- reading the log -------------------------------------------------------------


def the_run(repo: Path, env: dict[str, str]) -> str:
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    assert len(rows) == 1, rows
    return str(rows[0]["run"])


def records(repo: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git_wal(repo, "log", "--json", "--run", the_run(repo, env), env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def open_intent(repo: Path, env: dict[str, str]) -> dict[str, Any] | None:
    """The newest record, when it is an intent (the step in flight)."""
    try:
        recs = records(repo, env)
    except AssertionError:  # no run yet
        return None
    return recs[-1] if recs and recs[-1]["type"] == "intent" else None


def call_of(rec: dict[str, Any]) -> str | None:
    agent = rec.get("args", {}).get("agent")
    return agent.get("call") if isinstance(agent, dict) else None


def closing(recs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """intent LSN -> the commit or abort record that closed it."""
    return {r["intent"]: r for r in recs if r["type"] in ("commit", "abort")}


def committed_per_path(recs: list[dict[str, Any]]) -> dict[str, int]:
    closed = closing(recs)
    out: dict[str, int] = {}
    for r in recs:
        if r["type"] == "intent" and closed.get(r["lsn"], {}).get("type") == "commit":
            for path in r["target"]:
                out[path] = out.get(path, 0) + 1
    return out


def tree_files(repo: Path) -> dict[str, str]:
    """Every file of the working tree outside .git, by path."""
    return {p.relative_to(repo).as_posix(): p.read_text()
            for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.parts}


def release_fifo(fifo: Path) -> None:
    """Give a reader blocked on ``fifo`` its end of file (if one is still there)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: no reader left
            raise


# -- a: the 40-file rename, killed and resumed ---------------------------------------


def rename_session(tmp_path: Path, claude_bin: Path, name: str) -> tuple[Path, RenameAgent]:
    files = rename_files(N_FILES)
    plan = sorted(p for p in files if p.startswith("src/f"))
    repo = make_project(tmp_path / name, files, sealed_env(tmp_path / f"home-{name}"))
    return repo, RenameAgent(repo, files, plan)


def renamed_prefix(repo: Path, agent: RenameAgent) -> int:
    """How many plan files, from the first, the tree holds renamed (the rest untouched)."""
    done = [(repo / p).read_text() != agent.files[p] for p in agent.plan]
    n = done.index(False) if False in done else len(done)
    assert not any(done[n:]), f"renamed out of order: {done}"
    return n


@pytest.mark.parametrize("moment", ["at-pre-tool-use", "after-the-edit"])
def test_rename_killed_mid_run_resumes_exactly_where_the_log_says(
        tmp_path: Path, claude_bin: Path, moment: str) -> None:
    """Killed while Edit #23 waits after gitwal's PreToolUse (its intent logged, the
    file untouched), or as soon as Edit #23 has changed its file (gitwal's
    PostToolUse may or may not have run)."""
    env = sealed_env(tmp_path / "home")
    repo, agent = rename_session(tmp_path, claude_bin, "killed")
    files = agent.files
    victim = agent.plan[KILL_AT - 1]
    entered = tmp_path / "gate-entered"
    if moment == "at-pre-tool-use":
        write_settings(repo, hooks_settings(
            {"PreToolUse": command("gate", victim, str(entered))}, matcher="Edit"),
            "settings.local.json")
    sid = str(uuid.uuid4())
    with FakeApi(agent, log_path=tmp_path / "requests.jsonl") as api:
        cc = ClaudeCode(claude_bin, tmp_path / "home", api.url)
        proc = cc.start(repo, PROMPT, session_id=sid, log=tmp_path / "killed.log")
        try:
            if moment == "at-pre-tool-use":
                wait_until(entered.exists, WAIT, f"the Edit of {victim} at PreToolUse", proc)
                wait_until(lambda: (open_intent(repo, env) or {}).get("target") == [victim],
                           WAIT, f"gitwal's intent for {victim}", proc)
            else:
                wait_until(lambda: (repo / victim).read_text() != files[victim], WAIT,
                           f"the Edit of {victim} landing", proc, interval=0.002)
        finally:
            sigkill(proc)
            stop_gate(entered)
        (repo / ".claude" / "settings.local.json").unlink(missing_ok=True)
        # The tree after the kill: a renamed prefix of the plan, nothing else touched.
        point = renamed_prefix(repo, agent)
        assert point == KILL_AT - 1 if moment == "at-pre-tool-use" else point >= KILL_AT
        first_seq = len(api.requests)

        out = cc.run(repo, "continue", resume=sid, timeout=600)
        assert out.returncode == 0 and out.result["subtype"] == "success", out.stderr
        assert api.errors == []
        resumed = [r for r in api.main_requests if r.seq >= first_seq]
        all_requests = api.main_requests
        emitted = [u for u in api.emitted if u.name == "Edit"]

    # The resumed session's first request holds gitwal's resume prompt, and the
    # point it names is the first file the tree does not hold renamed: the scripted
    # model, which reads the point from the prompt alone, went on from there.
    text = resumed[0].all_text()
    assert agent.resumes and agent.resumes[0] == (resumed[0].seq, point), text[-3000:]
    action = [ln for ln in text.splitlines() if ln.startswith("Action:")]
    # The Action always names a file of the plan (no plan steps: from the log's facts).
    assert action and any(p in action[-1] for p in agent.plan), text[-3000:]
    if moment == "at-pre-tool-use":
        # Redone with the model's own tool: a `git wal` command run through Bash
        # would be refused (that call's own hook opens an intent on the run first).
        assert victim in action[-1] and "with your Edit tool" in action[-1], action
        assert "git wal" not in action[-1], action

    # Every file renamed exactly once. The model asked for one Edit per file, twice
    # only for the file whose call was in flight, not yet run, at the kill. No Edit
    # failed (a redone edit would fail: its old string is gone); a result that the
    # resumed transcript lost is marked interrupted by Claude Code, and a result
    # Claude Code never sent (killed first) is in no request at all.
    asked: dict[str, list[str]] = {}
    for use in emitted:
        asked.setdefault(str(use.input["file_path"]), []).append(use.id)
    assert sorted(asked) == [str(repo / p) for p in agent.plan]
    twice = {p for p, ids in asked.items() if len(ids) != 1}
    if moment == "at-pre-tool-use":
        assert twice == {str(repo / victim)} and len(asked[str(repo / victim)]) == 2
    else:
        assert twice <= {str(repo / p) for p in agent.plan[point:point + 1]}, asked
    for path, rs in edit_results(all_requests).items():
        assert len([r for r in rs if not r.get("is_error")]) <= 1, (path, rs)
        assert all(is_interrupted(r) for r in rs if r.get("is_error")), (path, rs)
    # The log: one committed intent per file, for the call that ran; nothing open.
    recs = records(repo, env)
    assert committed_per_path(recs) == dict.fromkeys(agent.plan, 1)
    closed = closing(recs)
    for r in recs:
        if r["type"] == "intent" and closed.get(r["lsn"], {}).get("type") == "commit":
            assert call_of(r) == asked[str(repo / r["target"][0])][-1], r
    assert recs[-1]["type"] != "intent"

    # The final tree is the one an uninterrupted session leaves.
    ref_repo, ref_agent = rename_session(tmp_path, claude_bin, "uninterrupted")
    with FakeApi(ref_agent) as api:
        ref = ClaudeCode(claude_bin, tmp_path / "home-ref", api.url).run(
            ref_repo, PROMPT, timeout=600)
        assert ref.returncode == 0 and api.errors == [], ref.stderr
    assert tree_files(repo) == tree_files(ref_repo)
    assert tree_files(repo) == {**renamed(files, agent.plan),
                                ".claude/settings.json": (repo / ".claude/settings.json")
                                .read_text()}


# -- b, c: shell steps killed mid-command; compaction ------------------------------


def shell_session(tmp_path: Path, claude_bin: Path, fifo: Path
                  ) -> tuple[Path, str, ClaudeCode, FakeApi, list[ToolUse]]:
    """Two Bash steps; the second creates and deletes files, then blocks on ``fifo``.

    Returns with Claude Code SIGKILLed while the second command blocks (its
    intent open) and the scripted API still serving (the caller closes it).
    """
    env = sealed_env(tmp_path / "home")
    files = {"gone1.txt": "one\n", "gone2.txt": "two\n", "keep.txt": "keep\n"}
    repo = make_project(tmp_path / "repo", files, env)
    os.mkfifo(fifo)
    steps = [
        bash("printf 'made one\\n' > made1.txt && rm gone1.txt", "Create and delete a file"),
        bash(f"printf 'made two\\n' > made2.txt && rm gone2.txt && mkdir -p new && "
             f"printf 'x\\n' > new/x.txt && cat {fifo}", "Create, delete, then wait"),
    ]
    api = FakeApi(Steps(steps), log_path=tmp_path / "requests.jsonl").__enter__()
    sid = str(uuid.uuid4())
    cc = ClaudeCode(claude_bin, tmp_path / "home", api.url)
    proc = cc.start(repo, "Run the two steps.", session_id=sid, log=tmp_path / "killed.log")
    try:
        wait_until(lambda: (repo / "new" / "x.txt").exists(), WAIT,
                   "the second command's effects", proc)
        wait_until(lambda: open_intent(repo, env) is not None, WAIT,
                   "the second command's intent", proc)
    finally:
        sigkill(proc)
        release_fifo(fifo)
    return repo, sid, cc, api, api.emitted


def test_shell_step_killed_mid_command_is_in_doubt_with_its_changed_paths(
        tmp_path: Path, claude_bin: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo, _sid, _cc, api, emitted = shell_session(tmp_path, claude_bin, tmp_path / "fifo")
    api.__exit__(None, None, None)
    proc = git_wal(repo, "recover", "--json", env=env, ok=(3,))
    report = json.loads(proc.stdout)
    assert report["in_doubt"] is True
    [step] = [i for i in report["intents"] if i["open"]]
    assert step["tool"] == "exec" and step["outcome"] == "in-doubt"
    assert sorted(step["changed"]) == ["gone2.txt", "made2.txt", "new/x.txt"]
    assert call_of(step) == emitted[1].id
    # The first command ran to its end: committed, not in doubt.
    recs = records(repo, env)
    [first] = [r for r in recs if r["type"] == "intent" and call_of(r) == emitted[0].id]
    assert closing(recs)[first["lsn"]]["type"] == "commit"
    # `--restore` puts the second command's paths back and closes the step.
    git_wal(repo, "recover", "--restore", "--json", env=env)
    assert sorted(tree_files(repo)) == [".claude/settings.json", "gone2.txt", "keep.txt",
                                        "made1.txt"]


def test_compact_with_an_open_intent_is_refused_until_it_is_recovered(
        tmp_path: Path, claude_bin: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo, sid, cc, api, emitted = shell_session(tmp_path, claude_bin, tmp_path / "fifo")
    try:
        before = len(api.requests)
        out = cc.run(repo, "/compact", resume=sid)
        assert out.returncode == 0, out.stderr
        reason = str(out.result.get("result"))
        assert "Compaction blocked by PreCompact hook" in reason, reason
        assert "git wal recover --run" in reason and "--restore" in reason, reason
        assert not [r for r in api.requests[before:] if summary_request(r)]
        assert not [r for r in records(repo, env) if r["type"] == "checkpoint"]
        # SessionStart (resume) ran recovery and left the in-doubt step open.
        still = open_intent(repo, env)
        assert still is not None and call_of(still) == emitted[1].id, records(repo, env)

        git_wal(repo, "recover", "--restore", env=env)
        out = cc.run(repo, "/compact", resume=sid)
        assert out.returncode == 0, out.stderr
        assert "blocked" not in str(out.result.get("result")), out.result
        assert [r for r in api.requests[before:] if summary_request(r)]
        [cp] = [r for r in records(repo, env) if r["type"] == "checkpoint"]
        assert records(repo, env)[-1]["lsn"] >= cp["lsn"]
    finally:
        api.__exit__(None, None, None)


def summary_request(req: Request) -> bool:
    return req.is_main and "create a detailed summary" in (req.user_texts() or [""])[-1]


# -- d: every hook event reaches the log ----------------------------------------------


def test_each_hook_event_is_logged_with_the_tool_use_ids_of_the_calls(
        tmp_path: Path, claude_bin: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"a.txt": "alpha\n", "b.txt": "beta\n"}, env)
    steps = [
        ToolUse("Edit", {"file_path": str(repo / "a.txt"), "old_string": "alpha",
                         "new_string": "ALPHA"}),
        ToolUse("Write", {"file_path": str(repo / "c.txt"), "content": "gamma\n"}),
        bash("printf 'made\\n' > made.txt && rm b.txt", "Create one file, delete another"),
        bash("printf 'partial\\n' > partial.txt; exit 1", "A command that fails"),
    ]
    sid = str(uuid.uuid4())
    with FakeApi(Steps(steps), log_path=tmp_path / "requests.jsonl") as api:
        cc = ClaudeCode(claude_bin, tmp_path / "home", api.url)
        out = cc.run(repo, "Do the four steps.", session_id=sid)
        assert out.returncode == 0 and api.errors == [], out.stderr
        ids = [u.id for u in api.emitted]
        first = api.main_requests[0]
        before = len(api.requests)
        compact = cc.run(repo, "/compact", resume=sid)
        assert compact.returncode == 0, compact.stderr
        assert [r for r in api.requests[before:] if summary_request(r)], compact.result
    assert len(ids) == 4
    recs = records(repo, env)
    run = the_run(repo, env)
    # SessionStart: gitwal's context reached the model's first request.
    assert f"run {run}" in first.all_text(), first.all_text()[:3000]
    # PreToolUse: one intent per call, carrying the call's tool_use id.
    intents = [r for r in recs if r["type"] == "intent"]
    assert [call_of(r) for r in intents] == ids
    closed = closing(recs)
    # PostToolUse: the three calls that succeeded are committed ...
    assert [closed[r["lsn"]]["type"] for r in intents] == ["commit", "commit", "commit", "abort"]
    # ... PostToolUseFailure: the failed command is aborted, and what it left is on record.
    assert "PostToolUseFailure" in closed[intents[3]["lsn"]]["reason"]
    unlogged = [r for r in recs if r["type"] == "unlogged"]
    assert any("partial.txt" in r["paths"] for r in unlogged), unlogged
    # PreCompact: the manual /compact checkpointed first.
    assert [r for r in recs if r["type"] == "checkpoint"]


# -- recovery run through the agent's own Bash tool ------------------------------------


def test_recover_through_the_agents_own_bash_call_leaves_that_call_alone(
        tmp_path: Path, claude_bin: Path) -> None:
    """Claude Code exports CLAUDECODE=1 to its Bash commands: `git wal recover`
    run by the model finds its own call's intent open and refuses to decide it;
    the call's PostToolUse then commits it."""
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"a.txt": "alpha\n"}, env)
    exe = VENV_BIN / "git-wal"
    steps = [bash(f"{exe} recover 2> recover.err; echo $? > recover.code",
                  "Recover the run")]
    with FakeApi(Steps(steps), log_path=tmp_path / "requests.jsonl") as api:
        cc = ClaudeCode(claude_bin, tmp_path / "home", api.url)
        out = cc.run(repo, "Recover.", session_id=str(uuid.uuid4()))
        assert out.returncode == 0 and api.errors == [], out.stderr
        [call] = api.emitted
    assert (repo / "recover.code").read_text() == "1\n"
    err = (repo / "recover.err").read_text()
    assert "runs inside a claude-code tool call" in err and "hint:" in err, err
    recs = records(repo, env)
    [intent] = [r for r in recs if r["type"] == "intent"]
    assert call_of(intent) == call.id and intent["tool"] == "exec"
    assert closing(recs)[intent["lsn"]]["type"] == "commit"  # by its own PostToolUse


def test_a_respelled_irreversible_push_does_not_run_unasked_nor_can_the_model_approve(
        tmp_path: Path, claude_bin: Path) -> None:
    """`wal.irreversible 'git push*'` and the model's `cd . && git push`: the hook
    reads the line as a shell would, logs the call as irreversible and asks; with
    nobody to answer (`claude -p`) the push never runs. The model's own
    `CLAUDECODE= git wal approve` is refused by the hook before it runs."""
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"a.txt": "alpha\n"}, env)
    remote = tmp_path / "remote.git"
    cmd(tmp_path, "git", "init", "-q", "--bare", str(remote), env=env)
    cmd(repo, "git", "remote", "add", "origin", str(remote), env=env)
    cmd(repo, "git", "push", "-q", "origin", "main", env=env)
    cmd(repo, "git", "commit", "-q", "--allow-empty", "-m", "two", env=env)
    cmd(repo, "git", "config", "--add", "wal.irreversible", "git push*", env=env)
    pushed = cmd(remote, "git", "rev-parse", "main", env=env).stdout.strip()
    steps = [bash("cd . && git push -q origin main", "Push"),
             bash("CLAUDECODE= git wal approve 2 --yes; echo $? > approve.code", "Approve")]
    with FakeApi(Steps(steps), log_path=tmp_path / "requests.jsonl") as api:
        cc = ClaudeCode(claude_bin, tmp_path / "home", api.url)
        out = cc.run(repo, "Push.", session_id=str(uuid.uuid4()))
        assert out.returncode == 0 and api.errors == [], out.stderr
        push, approve = api.emitted
    assert cmd(remote, "git", "rev-parse", "main", env=env).stdout.strip() == pushed
    assert not (repo / "approve.code").exists()  # refused: it never ran
    recs = records(repo, env)
    [intent] = [r for r in recs if r["type"] == "intent"]
    assert call_of(intent) == push.id and intent["args"]["irreversible"] is True
    assert not any(r["type"] == "approval" for r in recs)
    assert all(call_of(r) != approve.id for r in recs if r["type"] == "intent")
