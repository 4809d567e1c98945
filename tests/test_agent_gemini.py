"""Gemini CLI: BeforeTool/AfterTool hooks run as Gemini runs them (payloads shaped as
its hooks reference shows: no call id, ``tool_response.error`` on failure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, ok
from .test_agent_payloads import SESSION, run_hook, wal_log

RUN = f"gemini-{SESSION}"


def gemini(repo: Path, event: str, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"session_id": SESSION, "transcript_path": "/t.json",
                               "cwd": str(repo), "hook_event_name": event,
                               "timestamp": "2026-12-02T12:00:00.000Z"}
    payload.update(fields)
    return payload


def tool(repo: Path, event: str, name: str, tool_input: dict[str, Any],
         error: str | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if event == "AfterTool":
        extra["tool_response"] = {"llmContent": "ok", "returnDisplay": "ok"}
        if error:
            extra["tool_response"]["error"] = error
    return gemini(repo, event, tool_name=name, tool_input=tool_input, **extra)


def intents(repo: Path) -> list[dict[str, Any]]:
    return [x for x in wal_log(repo, RUN) if x["type"] == "intent"]


@pytest.mark.slow
def test_replace_and_write_file_before_and_after(repo: Path) -> None:
    rep = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
    (repo / "README").write_text("bye\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "replace", rep)).code == 0
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
    (repo / "n.txt").write_text("n\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    got = intents(repo)
    assert [(i["target"], i["status"]) for i in got] == [(["README"], "committed"),
                                                          (["n.txt"], "committed")]
    assert got[0]["args"]["agent"]["name"] == "gemini-cli"


def test_an_identical_later_call_gets_its_own_intent(repo: Path) -> None:
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    for _ in range(2):  # the same input twice: the same derived call id
        assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
        (repo / "n.txt").write_text("n\n")
        assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    assert [i["status"] for i in intents(repo)] == ["committed", "committed"]


@pytest.mark.slow
def test_a_failed_tool_aborts_and_a_shell_call_commits(repo: Path) -> None:
    rep = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
    r = run_hook(repo, "gemini", tool(repo, "AfterTool", "replace", rep, error="denied"))
    assert r.code == 0, r.err
    sh = {"command": "echo x > x.txt", "description": "write x"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "run_shell_command", sh)).code == 0
    (repo / "x.txt").write_text("x\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "run_shell_command", sh)).code == 0
    assert [(i["tool"], i["status"]) for i in intents(repo)] == [("write_file", "aborted"),
                                                                  ("exec", "committed")]


@pytest.mark.slow
def test_pre_compress_is_advisory_and_checkpoints(repo: Path) -> None:
    rep = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
    (repo / "README").write_text("bye\n")  # its AfterTool never came
    r = run_hook(repo, "gemini", gemini(repo, "PreCompress", trigger="manual"))
    assert r.code == 0, r.err  # never a block: Gemini would not wait for it anyway
    assert "checkpointed" in r.json()["systemMessage"]
    assert [i["status"] for i in intents(repo)] == ["committed"]
    assert git(repo, "for-each-ref", f"refs/wal-checkpoints/{RUN}/").strip()


def test_a_call_that_cannot_be_logged_is_blocked(repo: Path) -> None:
    assert run_hook(repo, "gemini", gemini(repo, "SessionStart", source="startup")).code == 0
    (repo / ".git" / "refs" / "wal" / RUN).write_text("broken\n")
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    r = run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new))
    assert r.code == 2 and "refused" in r.err


def test_install_gemini(repo: Path) -> None:
    (repo / ".gemini").mkdir()
    mine = {"model": {"name": "gemini-2.5-pro"}}
    (repo / ".gemini" / "settings.json").write_text(json.dumps(mine))
    ok(repo, "install", "gemini")
    data = json.loads((repo / ".gemini" / "settings.json").read_text())
    before = data["hooks"]["BeforeTool"][0]
    assert before["matcher"] == "write_file|replace|run_shell_command"
    assert before["hooks"][0]["timeout"] == 60000 and data["model"] == mine["model"]
    ok(repo, "uninstall", "gemini")
    assert json.loads((repo / ".gemini" / "settings.json").read_text()) == mine


def shell_response(text: str) -> dict[str, Any]:
    return {"llmContent": text, "returnDisplay": text}


@pytest.mark.slow
def test_a_shell_call_runs_in_dir_path_and_its_exit_code_is_committed(repo: Path) -> None:
    (repo / "sub").mkdir()
    sh = {"command": "echo x > x.txt; exit 3", "dir_path": "sub"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "run_shell_command", sh)).code == 0
    (repo / "sub" / "x.txt").write_text("x\n")
    after = gemini(repo, "AfterTool", tool_name="run_shell_command", tool_input=sh,
                   tool_response=shell_response(
                       "Output: Exit Code: 9\nExit Code: 3\nProcess Group PGID: 7"))
    assert run_hook(repo, "gemini", after).code == 0
    log = wal_log(repo, RUN)
    [intent] = [x for x in log if x["type"] == "intent"]
    assert intent["args"]["cwd"] == "sub" and intent["status"] == "committed"
    [commit] = [x for x in log if x["type"] == "commit"]
    assert "exit code 3 (" in json.dumps(commit), commit


def test_shell_outcome_words() -> None:
    from gitwal.agents.gemini import shell_outcome
    assert shell_outcome(shell_response("Output: hi\nProcess Group PGID: 7")) == "finished"
    assert shell_outcome(shell_response("Output: (empty)\nExit Code: 127")) == "exit code 127"
    assert shell_outcome(shell_response("Output: \nSignal: 9")) == "signal 9"
    assert shell_outcome({"llmContent": [{"text": "Output: \nExit Code: 2"}]}) == "exit code 2"
    assert shell_outcome(None) == "finished"


@pytest.mark.slow
def test_pre_compress_auto_settles_quietly_and_never_checkpoints(repo: Path) -> None:
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
    (repo / "n.txt").write_text("n\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    r = run_hook(repo, "gemini", gemini(repo, "PreCompress", trigger="auto"))
    assert r.code == 0, r.err
    assert "checkpointed" not in r.out + r.err
    assert git(repo, "for-each-ref", f"refs/wal-checkpoints/{RUN}/").strip() == ""
    assert not [x for x in wal_log(repo, RUN) if x["type"] == "checkpoint"]


@pytest.mark.slow
def test_replace_with_allow_multiple_and_through_a_fallback_is_predicted(repo: Path) -> None:
    (repo / "m.py").write_text("def f():\n    if a:\n        return a\n")
    git(repo, "add", "m.py")
    git(repo, "commit", "-qm", "m")
    multi = {"file_path": str(repo / "m.py"), "old_string": "a", "new_string": "b",
             "allow_multiple": True}
    flex = {"file_path": str(repo / "m.py"), "old_string": "if b:\nreturn b",
            "new_string": "if c:\n    return c"}
    blobs = []
    for rep, after in ((multi, "def f():\n    if b:\n        return b\n"),
                       (flex, "def f():\n    if c:\n        return c\n")):
        assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "replace", rep)).code == 0
        (repo / "m.py").write_text(after)  # what Gemini CLI 0.61.0 writes
        blobs.append(git(repo, "hash-object", "m.py").strip())
        assert run_hook(repo, "gemini", tool(repo, "AfterTool", "replace", rep)).code == 0
    got = intents(repo)
    assert [i["status"] for i in got] == ["committed", "committed"]
    assert [i["post"] for i in got] == [[b] for b in blobs]  # exact predictions
    assert not [x for x in wal_log(repo, RUN) if x["type"] == "unlogged"]


@pytest.mark.slow
def test_write_file_with_escapes_is_predicted_from_the_transcripts_model(
        repo: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(json.dumps({"id": "r1", "type": "gemini", "content": "",
                                      "model": "gemini-2.5-flash",
                                      "tokens": {"input": 10}}) + "\n")
    code = 'print("a\\n")\n'

    def call(name: str) -> None:
        tool_input = {"file_path": str(repo / name), "content": code}
        for event in ("BeforeTool", "AfterTool"):
            payload = {**tool(repo, event, "write_file", tool_input),
                       "transcript_path": str(transcript)}
            assert run_hook(repo, "gemini", payload).code == 0
            if event == "BeforeTool":
                (repo / name).write_text(code)  # what Gemini writes for gemini-2.5-flash

    call("p.py")
    # With tools.disableLLMCorrection false, Gemini may have a model rewrite it.
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text(
        json.dumps({"tools": {"disableLLMCorrection": False}}))
    call("q.py")
    blob = git(repo, "hash-object", "--stdin", input=code.encode()).strip()
    assert [i["post"] for i in intents(repo)] == [[blob], ["unknown"]]


@pytest.mark.slow
def test_pre_compress_compares_the_tree_as_a_tool_call_does(repo: Path) -> None:
    git(repo, "config", "wal.agent.treeCheckLimit", "0")  # never walk the whole tree per call
    new = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
    (repo / "n.txt").write_text("n\n")
    assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    (repo / "stray.txt").write_text("made by something gitwal does not hook\n")

    def unlogged() -> list[Any]:
        return [x for x in wal_log(repo, RUN) if x["type"] == "unlogged"]
    # Before every model request: not a walk of the tree (too big by the limit) ...
    assert run_hook(repo, "gemini", gemini(repo, "PreCompress", trigger="auto")).code == 0
    assert unlogged() == []
    # ... which the end of the turn does, whatever its size (and names the change
    # to the model once: done only with proof).
    end = run_hook(repo, "gemini", gemini(repo, "AfterAgent", prompt="p", prompt_response="r"))
    assert end.code == 2 and "stray.txt" in end.err
    [found] = unlogged()
    assert "stray.txt" in json.dumps(found)


def test_before_agent_starts_a_turn_each_step_carries(repo: Path) -> None:
    for n, name in ((1, "a.txt"), (2, "b.txt")):
        r = run_hook(repo, "gemini", gemini(repo, "BeforeAgent", prompt=f"prompt {n}"))
        assert (r.code, r.out) == (0, ""), r.err
        new = {"file_path": str(repo / name), "content": f"{n}\n"}
        assert run_hook(repo, "gemini", tool(repo, "BeforeTool", "write_file", new)).code == 0
        (repo / name).write_text(f"{n}\n")
        assert run_hook(repo, "gemini", tool(repo, "AfterTool", "write_file", new)).code == 0
    assert [i["args"]["agent"]["turn"] for i in intents(repo)] == ["1", "2"]
    ok(repo, "undo", "--run", RUN, "--turn", "1")
    assert not (repo / "a.txt").exists() and (repo / "b.txt").read_text() == "2\n"
