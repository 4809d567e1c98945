"""The real Codex CLI (0.169.0) with gitwal's hooks (`git wal install codex --trust`).

Real repositories in temp dirs, real `codex exec` processes, a real SIGKILL;
only the model is scripted (tests/e2e/fake_responses.py). The hooks run
because they are trusted as a user trusts them (tests/e2e/codex.py), never
through a trust bypass. docs/e2e.md describes the harness.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import apply_patch

from .claude import cmd, git_wal, sigkill, wait_until
from .codex import Codex, make_project, payloads
from .fake_responses import CustomCall, FakeResponses, FunctionCall, Message, Request

WAIT = 120.0  # seconds for anything a test waits on (a loaded 2-core machine)
FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex-0.169.0"

pytestmark = pytest.mark.slow


# -- reading the log ---------------------------------------------------------------


def the_run(repo: Path, env: dict[str, str]) -> str:
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    assert len(rows) == 1, rows
    return str(rows[0]["run"])


def records(repo: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git_wal(repo, "log", "--json", "--run", the_run(repo, env), env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def closing(recs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """intent LSN -> the commit or abort record that closed it."""
    return {r["intent"]: r for r in recs if r["type"] in ("commit", "abort")}


def tree_files(repo: Path) -> dict[str, str]:
    return {p.relative_to(repo).as_posix(): p.read_bytes().decode()
            for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.parts and ".codex" not in p.parts}


def predicted(patch: str, files: dict[str, str]) -> dict[str, str | None]:
    """What gitwal's own apply_patch model says the patch leaves, per target."""
    ops = apply_patch.parse(patch)
    pre = {p: (files[p].encode() if p in files else None) for p in apply_patch.targets(ops)}
    return {p: (v.decode() if v is not None else None)
            for p, v in apply_patch.post_images(ops, pre).items()}


class Player:
    """The scripted model: replies in order, one list of items per model request."""

    def __init__(self, *replies: list[Any]) -> None:
        self.replies = list(replies)

    def __call__(self, req: Request) -> list[Any]:
        return self.replies.pop(0) if self.replies else [Message("Done.")]


def one_patch_session(tmp_path: Path, codex_bin: Path, files: dict[str, str],
                      patch: str) -> tuple[Path, dict[str, str], list[dict[str, Any]], Path]:
    """One ``codex exec`` whose model sends ``patch``; (repo, env, records, payloads dir)."""
    with FakeResponses(Player([CustomCall("apply_patch", patch)])) as api:
        codex = Codex(codex_bin, tmp_path / "home", api.url)
        repo = make_project(tmp_path / "repo", codex, files)
        codex.record_payloads(tmp_path / "payloads")
        out = codex.run(repo, "apply the patch")
        assert out.returncode == 0, out.stderr[-2000:]
        assert api.errors == []
        # Codex told the model the patch applied.
        assert "Success." in api.model_requests[1].outputs()["call_e2e_00001"]
    env = codex.env()
    return repo, env, records(repo, env), tmp_path / "payloads"


def keys_of(payload: dict[str, Any]) -> list[str]:
    return sorted(payload)


# -- a: a multi-file patch is one intent, committed as predicted ---------------------

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/app.py
*** Move to: src/main.py
@@ def main():
-    return 1
+    return 2
*** Delete File: old.txt
*** Update File: README
@@
-hello
+hello, world
*** End Patch
"""
FILES = {"README": "hello\n", "src/app.py": "def main():\n    return 1\n", "old.txt": "old\n"}


def test_a_multi_file_patch_is_one_intent_committed_as_predicted(
        tmp_path: Path, codex_bin: Path) -> None:
    repo, env, recs, recorded = one_patch_session(tmp_path, codex_bin, FILES, PATCH)
    want = predicted(PATCH, FILES)
    assert tree_files(repo) == {p: t for p, t in want.items() if t is not None}
    intents = [r for r in recs if r["type"] == "intent"]
    assert len(intents) == 1, recs
    [intent] = intents
    assert intent["tool"] == "write_files"
    assert intent["target"] == ["docs/new.md", "src/app.py", "src/main.py", "old.txt", "README"]
    assert intent["args"]["agent"]["call"] == "call_e2e_00001"
    commit = closing(recs)[intent["lsn"]]
    assert commit["type"] == "commit" and commit["post"] == intent["post"], commit
    assert "codex PostToolUse apply_patch" in commit["verified"]
    # No checkpoint per turn: Stop settles and checks, it does not checkpoint.
    assert not [r for r in recs if r["type"] in ("checkpoint", "unlogged")], recs
    assert git_wal(repo, "verify", env=env).returncode == 0

    # The payloads this Codex sends carry the keys recorded in the fixtures: an
    # upgrade that changes them fails here first.
    live: dict[str, list[str]] = {}
    for p in payloads(recorded):
        tool = {"Bash": "-bash", "apply_patch": "-apply-patch"}.get(p.get("tool_name", ""), "")
        name = {"SessionStart": "session-start", "PreToolUse": "pre-tool-use",
                "PostToolUse": "post-tool-use", "Stop": "stop"}[p["hook_event_name"]] + tool
        live[name] = keys_of(p)
    assert set(live) == {"session-start", "pre-tool-use-apply-patch",
                         "post-tool-use-apply-patch", "stop"}, live
    for name, keys in live.items():
        assert keys == keys_of(json.loads((FIXTURES / f"{name}.json").read_text())), name


# -- b: a patch only Codex's lenient matching applies --------------------------------

LENIENT_FILES = {
    "notes.py": "say(\u201chello\u201d)  \n    indented\nend\nmiddle\nend\n",
    "list.txt": "a\nb",
    "mixed.txt": "a\r\nb\nc\r\nd\n",
}
LENIENT = """*** Begin Patch
*** Update File: notes.py
@@
-say("hello")
+say("hi")
@@
-indented
+INDENTED
@@
-end
+END
*** End of File
*** Update File: list.txt
@@
+c
*** Update File: mixed.txt
@@
-b
+B
*** End Patch
"""


def test_a_patch_that_needs_lenient_matching_is_still_predicted_exactly(
        tmp_path: Path, codex_bin: Path) -> None:
    repo, _env, recs, _ = one_patch_session(tmp_path, codex_bin, LENIENT_FILES, LENIENT)
    want = predicted(LENIENT, LENIENT_FILES)
    # The typographic quotes, the trailing blanks and the indentation were matched
    # loosely, the last "end" by its end-of-file anchor, the addition appended;
    # each line kept its ending, the new one took the file's first.
    assert want == {"notes.py": 'say("hi")\nINDENTED\nend\nmiddle\nEND\n',
                    "list.txt": "a\nb\nc\n", "mixed.txt": "a\r\nB\r\nc\r\nd\n"}
    assert {p: tree_files(repo)[p] for p in want} == want
    [intent] = [r for r in recs if r["type"] == "intent"]
    commit = closing(recs)[intent["lsn"]]
    assert commit["type"] == "commit" and commit["post"] == intent["post"], (intent, commit)
    assert "unknown" not in intent["post"]


CONTEXT_FILES = {"ctx.txt": "alpha  \nbeta\n"}
CONTEXT = """*** Begin Patch
*** Update File: ctx.txt
@@
 alpha
-beta
+BETA
*** End Patch
"""


def test_a_loosely_matched_context_line_is_predicted_as_codex_writes_it(
        tmp_path: Path, codex_bin: Path) -> None:
    """The context line matched without the file's trailing blanks: Codex keeps
    them, and so does the prediction (no "prediction miss")."""
    repo, _env, recs, _ = one_patch_session(tmp_path, codex_bin, CONTEXT_FILES, CONTEXT)
    assert predicted(CONTEXT, CONTEXT_FILES) == {"ctx.txt": "alpha  \nBETA\n"}
    assert tree_files(repo)["ctx.txt"] == "alpha  \nBETA\n"
    [intent] = [r for r in recs if r["type"] == "intent"]
    commit = closing(recs)[intent["lsn"]]
    assert commit["type"] == "commit" and commit["post"] == intent["post"], (intent, commit)
    assert "prediction miss" not in json.dumps(commit)


# -- c: a shell call that exits 3 -----------------------------------------------------


def test_a_shell_call_that_exits_3_is_committed_with_what_the_payload_says(
        tmp_path: Path, codex_bin: Path) -> None:
    command = 'printf %s "$CODEX_TOOL_CALL_ID" > call-id.txt; echo made > made.txt; exit 3'
    with FakeResponses(Player([FunctionCall("exec_command", {"cmd": command})])) as api:
        codex = Codex(codex_bin, tmp_path / "home", api.url)
        repo = make_project(tmp_path / "repo", codex, {"README": "hi\n"})
        out = codex.run(repo, "run it")
        assert out.returncode == 0, out.stderr[-2000:]
        # The command did exit 3: Codex said so to the model ...
        assert "exited with code 3" in api.model_requests[1].outputs()["call_e2e_00001"]
    env = codex.env()
    recs = records(repo, env)
    [intent] = [r for r in recs if r["type"] == "intent"]
    assert intent["tool"] == "exec" and intent["args"]["argv"][-1] == command
    # ... but its PostToolUse payload carries the output only, so the commit says
    # "finished", not "tool succeeded".
    commit = closing(recs)[intent["lsn"]]
    assert commit["type"] == "commit", commit
    assert commit["verified"].startswith("finished (codex PostToolUse Bash"), commit
    # Codex exports the call's id to the command: the hook's tool_use_id.
    assert (repo / "call-id.txt").read_text() == intent["args"]["agent"]["call"]
    assert (repo / "made.txt").read_text() == "made\n"


# -- d: SIGKILL mid-session, then `codex exec resume` ---------------------------------


def test_a_killed_session_resumes_with_gitwal_resume_prompt(
        tmp_path: Path, codex_bin: Path) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    release = threading.Event()
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch\n"

    def script(req: Request) -> list[Any]:
        if req.n == 0:
            return [CustomCall("apply_patch", patch)]
        if req.n == 1:
            # The patch is done and Codex waits for the model: it is killed now
            # (the test waits on this request's signal file, then kills).
            release.wait(WAIT)
            return [Message("never delivered")]
        return [Message("Resumed.")]

    with FakeResponses(script, signal_dir=signals) as api:
        codex = Codex(codex_bin, tmp_path / "home", api.url)
        repo = make_project(tmp_path / "repo", codex, {"a.txt": "one\n"})
        log = tmp_path / "codex.log"
        proc = codex.start(repo, "change a.txt", log)
        try:
            wait_until(lambda: (signals / "request-1").exists(), WAIT,
                       "codex asked the model after the patch", proc)
        finally:
            sigkill(proc)
            release.set()
        env = codex.env()
        assert (repo / "a.txt").read_text() == "ONE\n"
        thread = next(json.loads(line)["thread_id"] for line in log.read_text().splitlines()
                      if '"thread.started"' in line)
        before = len(api.model_requests)
        out = codex.run(repo, "go on", resume=thread)
        assert out.returncode == 0, out.stderr[-2000:]
        resumed = api.model_requests[before:]
    # The resumed session's first model request carries gitwal's resume prompt.
    text = resumed[0].all_text()
    run = the_run(repo, env)
    assert run == f"codex-{thread}"
    assert f"logged as run {run}" in text, text[-3000:]
    assert "Committed: 1 step(s), the last at LSN 2" in text, text[-3000:]
    recs = records(repo, env)
    # One intent, committed before the kill; no checkpoint per turn.
    assert [r["type"] for r in recs] == ["plan", "intent", "commit"], recs


# -- e: a stale hook trust, as doctor reports it and Codex treats it ------------------


def hook_trust(repo: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """`git wal doctor`'s Codex hook-trust findings."""
    doctor = json.loads(git_wal(repo, "doctor", "--json", env=env, ok=(0, 1)).stdout)
    return [c for c in doctor["checks"] if c["check"].endswith(": hook trust")]


def test_a_hook_whose_trust_is_stale_is_skipped_by_codex_and_named_by_doctor(
        tmp_path: Path, codex_bin: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-{0}\n+{1}\n*** End Patch\n"
    # The second reply ends the turn; gitwal's Stop hook refuses that once (the
    # patch's change is unlogged: docs/agents.md, "Done only with proof"), and
    # Codex asks again with the reason: the third reply.
    player = Player([CustomCall("apply_patch", patch.format("one", "two"))], [Message("ok")],
                    [Message("a.txt is my patch's change.")],
                    [CustomCall("apply_patch", patch.format("two", "three"))])
    with FakeResponses(player) as api:
        codex = Codex(codex_bin, tmp_path / "home", api.url)
        repo = make_project(tmp_path / "repo", codex, {"a.txt": "one\n"})
        env = codex.env()
        hooks = repo / ".codex" / "hooks.json"
        data = json.loads(hooks.read_text())
        data["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 30  # trusted at 60
        hooks.write_text(json.dumps(data, indent=2))
        cmd(repo, "git", "commit", "-qam", "hooks edited", env=env)
        [stale] = hook_trust(repo, env)
        assert not stale["ok"], stale
        assert stale["detail"].endswith("(codex skips them as modified): PreToolUse")

        # Codex agrees: the patch runs with no intent before it (only the trusted
        # PostToolUse hook saw it, and recorded the change as unlogged).
        assert codex.run(repo, "first").returncode == 0
        assert (repo / "a.txt").read_text() == "two\n"
        told = api.model_requests[-1].all_text()
        assert "changed with no logged step explaining them (a.txt)" in told, told[-2000:]
        recs = records(repo, env)
        assert not [r for r in recs if r["type"] == "intent"], recs
        assert [r["paths"] for r in recs if r["type"] == "unlogged"] == [["a.txt"]], recs

        # Installing again puts gitwal's definition back, and it is trusted again.
        git_wal(repo, "install", "codex", "--trust", env=env)
        assert [c["ok"] for c in hook_trust(repo, env)] == [True]
        assert codex.run(repo, "second").returncode == 0
        assert api.errors == []
    assert (repo / "a.txt").read_text() == "three\n"
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    assert len(rows) == 2, rows
    second = [r for r in rows if r["run"] not in {rec["run"] for rec in recs}]
    later = [json.loads(line) for line in git_wal(
        repo, "log", "--json", "--run", second[0]["run"], env=env).stdout.splitlines()]
    [intent] = [r for r in later if r["type"] == "intent"]
    assert intent["tool"] == "write_file" and intent["target"] == ["a.txt"]
    assert closing(later)[intent["lsn"]]["post"] == intent["post"]


def release_fifo(fifo: Path) -> None:
    """Give a reader blocked on ``fifo`` its end of file (if one is still there)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: no reader left
            raise


def test_a_session_killed_inside_a_shell_call_resumes_with_the_step_in_doubt(
        tmp_path: Path, codex_bin: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    command = f"echo started > started.txt; cat {gate} > /dev/null"
    player = Player([FunctionCall("exec_command", {"cmd": command})])
    with FakeResponses(player) as api:
        codex = Codex(codex_bin, tmp_path / "home", api.url)
        repo = make_project(tmp_path / "repo", codex, {"README": "hi\n"})
        log = tmp_path / "codex.log"
        proc = codex.start(repo, "run it", log)
        try:
            # The command runs only after its PreToolUse hook made the intent durable.
            wait_until(lambda: (repo / "started.txt").exists(), WAIT,
                       "the shell call started", proc)
        finally:
            sigkill(proc)
            release_fifo(gate)
        env = codex.env()
        [intent] = [r for r in records(repo, env) if r["type"] == "intent"]
        assert records(repo, env)[-1] == intent  # open: no closing hook came
        thread = next(json.loads(line)["thread_id"] for line in log.read_text().splitlines()
                      if '"thread.started"' in line)
        before = len(api.model_requests)
        out = codex.run(repo, "go on", resume=thread)
        assert out.returncode == 0, out.stderr[-2000:]
        resumed = api.model_requests[before:]
    # SessionStart's recovery found the step in flight and changed the tree: the
    # resumed model is told it is in doubt, and the step stays open until decided.
    text = resumed[0].all_text()
    assert f"LSN {intent['lsn']} is in doubt" in text, text[-3000:]
    assert "was intended, not committed" in text, text[-3000:]
    recs = records(repo, env)
    assert not [r for r in recs if r["type"] in ("commit", "abort")
                and r["intent"] == intent["lsn"]], recs


# -- f: done only with proof ---------------------------------------------------------


def test_stop_is_refused_while_the_users_check_fails(tmp_path: Path, codex_bin: Path) -> None:
    """Codex's Stop hook exits 2 with the reason: Codex sends it to the model as a
    continuation prompt, and the turn ends once the check passes."""
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-broken\n+fixed\n*** End Patch\n"
    player = Player([Message("Done.")], [CustomCall("apply_patch", patch)], [Message("Fixed.")])
    with FakeResponses(player) as api:
        codex = Codex(codex_bin, tmp_path / "home", api.url)
        repo = make_project(tmp_path / "repo", codex, {"a.txt": "broken\n"})
        env = codex.env()
        cmd(repo, "git", "config", "wal.done.check",
            "grep -q fixed a.txt || { echo 'a.txt is still broken'; exit 1; }", env=env)
        out = codex.run(repo, "Fix a.txt.")
        assert out.returncode == 0, out.stderr
        assert api.errors == []
        asks = api.model_requests
    assert len(asks) == 3, [r.all_text()[-300:] for r in asks]
    told = asks[1].all_text()
    assert "the project's check `grep -q fixed a.txt" in told and "a.txt is still broken" \
        in told, told[-2000:]
    assert (repo / "a.txt").read_text() == "fixed\n"
    recs = records(repo, env)
    [intent] = [r for r in recs if r["type"] == "intent"]
    assert closing(recs)[intent["lsn"]]["type"] == "commit"
