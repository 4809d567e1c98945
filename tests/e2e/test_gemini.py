"""The real Gemini CLI with gitwal's hooks (`git wal install gemini`).

Real repositories in temp dirs, real `gemini` processes, a real SIGKILL; only
the model is scripted (tests/e2e/fake_gemini.py). docs/e2e.md describes the
harness.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from .claude import cmd, git_wal, sigkill, wait_until
from .fake_gemini import Call, FakeGemini, Request, Steps, Text
from .gemini import GeminiCli, make_project, sealed_env
from .hook_helpers import command, stop_gate

WAIT = 120.0  # seconds for anything a test waits on (a loaded 2-core machine)
FIXTURES = Path(__file__).parents[1] / "fixtures" / "gemini-0.61.0"
ESCAPED = 'print("one\\ntwo")\n'  # a backslash escape Gemini may undo for older models
SOURCE = "def total(items):\n    if items:\n        return sum(items)\n    return 0\n"


def records(repo: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    rows = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    assert len(rows) == 1, rows
    out = git_wal(repo, "log", "--json", "--run", str(rows[0]["run"]), env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def blob(repo: Path, name: str, env: dict[str, str]) -> str:
    return cmd(repo, "git", "hash-object", name, env=env).stdout.strip()


def payload_shape(p: dict[str, Any]) -> dict[str, Any]:
    """The keys of a payload and of its tool response (a tool input holds what the
    model chose to send)."""
    return {"keys": sorted(p), "tool_response": sorted(p.get("tool_response") or {})}


def fixture_name(p: dict[str, Any]) -> str:
    ev = str(p["hook_event_name"])
    return f"{ev}-{p['tool_name']}" if "tool_name" in p else ev


@pytest.mark.slow
def test_a_session_of_edits_and_a_shell_call_is_logged_exactly(gemini_bin: Path,
                                                               tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "home")
    seen = tmp_path / "payloads.jsonl"
    record = [command("record", str(seen))]
    repo = make_project(tmp_path / "repo", {"calc.py": SOURCE, "sub/keep": "k\n"}, env,
                        extra={e: record for e in ("SessionStart", "PreCompress",
                                                   "BeforeTool", "AfterTool", "AfterAgent")})
    calc = str(repo / "calc.py")
    script = Steps([
        [Text("Writing notes."), Call("write_file", {"file_path": str(repo / "notes.txt"),
                                                      "content": "one\ntwo\n"})],
        [Call("replace", {"file_path": calc, "old_string": "return 0",
                          "new_string": "return None", "instruction": "exact"})],
        [Call("replace", {"file_path": calc, "old_string": "items",
                          "new_string": "values", "allow_multiple": True,
                          "instruction": "rename everywhere"})],
        # Not in the file as given (indentation differs): Gemini's flexible match.
        [Call("replace", {"file_path": calc, "old_string": "if values:\nreturn sum(values)",
                          "new_string": "if values:\n    return sum(values) or None",
                          "instruction": "flexible"})],
        # A typo: only Gemini's fuzzy match (Levenshtein) applies it.
        [Call("replace", {"file_path": calc, "old_string": "        retrun sum(values) or None",
                          "new_string": "        return sum(values) or 0",
                          "instruction": "fuzzy"})],
        # Escapes, written as given by gemini-2.5-flash (the transcript names the model).
        [Call("write_file", {"file_path": str(repo / "p.py"), "content": ESCAPED})],
        [Call("run_shell_command", {"command": "pwd > where.txt; exit 3", "dir_path": "sub",
                                    "description": "fails on purpose"})],
        [Text("All done.")],
    ])
    with FakeGemini(script) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        cli.trust(repo)
        out = cli.run(repo, "Tidy calc.py.")
    assert not api.errors, api.errors
    assert out.returncode == 0, out.stderr[-3000:]
    assert (repo / "calc.py").read_text() == (
        "def total(values):\n    if values:\n        return sum(values) or 0\n"
        "    return None\n")
    assert (repo / "p.py").read_text() == ESCAPED
    assert (repo / "sub" / "where.txt").read_text().strip() == str(repo / "sub")

    recs = records(repo, env)
    intents = [r for r in recs if r["type"] == "intent"]
    closes = {r["intent"]: r for r in recs if r["type"] in ("commit", "abort")}
    assert [i["args"]["agent"]["tool"] for i in intents] == [
        "write_file", "replace", "replace", "replace", "replace", "write_file",
        "run_shell_command"]
    assert all(closes[i["lsn"]]["type"] == "commit" for i in intents)
    # Every file step was predicted exactly: the last calc.py intent's post is the file.
    assert intents[0]["post"] == [blob(repo, "notes.txt", env)]
    assert intents[4]["post"] == [blob(repo, "calc.py", env)]
    assert intents[5]["post"] == [blob(repo, "p.py", env)]
    for i in intents[:6]:
        assert i["post"] == closes[i["lsn"]]["post"], i
        assert "unknown" not in i["post"]
    shell = intents[6]
    assert shell["args"]["cwd"] == "sub"
    assert closes[shell["lsn"]]["verified"].startswith("exit code 3 ")
    assert not [r for r in recs if r["type"] in ("unlogged", "checkpoint")]
    # PreCompress ran before every model request; no checkpoint, no message.
    assert "checkpointed" not in out.stdout + out.stderr
    assert git_wal(repo, "status", env=env).returncode == 0

    payloads = [json.loads(line) for line in seen.read_text().splitlines()]
    assert sum(p["hook_event_name"] == "PreCompress" for p in payloads) >= 8
    for p in payloads:  # the live payloads have the recorded fixtures' shape
        name = fixture_name(p)
        want = json.loads((FIXTURES / f"{name}.json").read_text())
        assert payload_shape(p) == payload_shape(want), name
    assert {fixture_name(p) for p in payloads} == {f.stem for f in FIXTURES.glob("*.json")}


def is_resume_prompt(req: Request, run: str) -> bool:
    return any("gitwal" in t and run in t for t in req.user_texts())


@pytest.mark.slow
def test_killed_at_an_open_intent_then_resumed(gemini_bin: Path, tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "home")
    entered = tmp_path / "gate"
    gate = command("gate", "calc.py", str(entered))
    repo = make_project(tmp_path / "repo", {"calc.py": SOURCE}, env,
                        extra={"BeforeTool": [gate]})
    calc = str(repo / "calc.py")
    script = Steps([
        [Call("write_file", {"file_path": str(repo / "notes.txt"), "content": "n\n"})],
        [Call("replace", {"file_path": calc, "old_string": "return 0",
                          "new_string": "return None", "instruction": "x"})],
        [Text("Done.")],
    ])
    try:
        with FakeGemini(script) as api:
            cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
            cli.trust(repo)
            proc = cli.start(repo, "Edit calc.py.", log=tmp_path / "first.log")
            # gitwal's hook and the gate run side by side: wait for both.
            wait_until(entered.exists, WAIT, "the gate holds the replace", proc)

            def intent_open() -> bool:
                recs = records(repo, env)
                return bool(recs[-1]["type"] == "intent" and recs[-1]["target"] == ["calc.py"])
            wait_until(intent_open, WAIT, "gitwal's intent for calc.py", proc)
            sigkill(proc)
    finally:
        stop_gate(entered)
    assert (repo / "calc.py").read_text() == SOURCE  # killed before the tool ran
    [row] = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    run = str(row["run"])

    def resumed(req: Request) -> list[Call | Text]:
        # The old turns are in the history: answer the new prompt with the redo only.
        last = req.contents[-1].get("parts", [{}])
        if any("functionResponse" in p for p in last):
            return [Text("Done.")]
        return [Call("replace", {"file_path": calc, "old_string": "return 0",
                                 "new_string": "return None", "instruction": "redo"})]
    with FakeGemini(resumed) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        out = cli.run(repo, "continue", resume="latest")
        first = api.main_requests[0]
    assert out.returncode == 0, out.stderr[-3000:]
    assert is_resume_prompt(first, run), first.user_texts()
    assert (repo / "calc.py").read_text() == SOURCE.replace("return 0", "return None")
    recs = records(repo, env)
    intents = [r for r in recs if r["type"] == "intent"]
    closes = {r["intent"]: r for r in recs if r["type"] in ("commit", "abort")}
    assert [closes[i["lsn"]]["type"] for i in intents] == ["commit", "abort", "commit"]


def after_tool(req: Request) -> bool:
    """The request carries a tool's result (not the user's prompt)."""
    return any("functionResponse" in p for p in req.contents[-1].get("parts", []))


@pytest.mark.slow
def test_a_checkpoint_only_when_gemini_really_compresses(gemini_bin: Path,
                                                         tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"calc.py": SOURCE}, env)
    first = Steps([
        [Call("write_file", {"file_path": str(repo / "a.txt"), "content": "a\n"})],
        [Call("write_file", {"file_path": str(repo / "b.txt"), "content": "b\n"})],
        [Text("Done.")],
    ])
    # Past half the window already, but with one prompt Gemini has nothing to cut
    # before while the model calls tools: no compression, so no checkpoint either.
    # (The last reply is small: a resumed Gemini starts counting afresh, which the
    # transcript cannot show, and gitwal would secure the log once more there.)
    with FakeGemini(first, tokens=lambda req: 100 if len(req.function_responses()) == 2
                    else 600_000) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        cli.trust(repo)
        out = cli.run(repo, "Write two files.")
        assert not [r for r in api.requests if "distilling chat history" in r.all_text()]
    assert out.returncode == 0, out.stderr[-3000:]
    assert "checkpoint" not in [r["type"] for r in records(repo, env)]

    def second(req: Request) -> list[Call | Text]:
        if after_tool(req):
            return [Text("Done again.")]
        return [Call("write_file", {"file_path": str(repo / "c.txt"), "content": "c\n"})]

    def tokens(req: Request) -> int:
        # The reply to the new prompt reports 600,000 prompt tokens, more than half of
        # gemini-2.5-flash's window: Gemini compresses before its next request (the
        # history now holds a prompt to split at, which a one-prompt session does not).
        return 100 if after_tool(req) else 600_000

    with FakeGemini(second, tokens=tokens) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        out = cli.run(repo, "And a third.", resume="latest")
        summaries = [r for r in api.requests
                     if not r.is_main and "distilling chat history" in r.all_text()]
    assert out.returncode == 0, out.stderr[-3000:]
    assert summaries  # Gemini really compressed
    recs = records(repo, env)
    kinds = [r["type"] for r in recs]
    assert kinds.count("checkpoint") == 1, kinds
    # Secured after the third call was committed, at the compression.
    at = kinds.index("checkpoint")
    assert kinds[at - 2:at] == ["intent", "commit"] and recs[at - 2]["target"] == ["c.txt"]
    assert "checkpointed" in out.stderr


@pytest.mark.slow
def test_an_untrusted_folder_runs_no_hook_and_doctor_says_so(gemini_bin: Path,
                                                             tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"calc.py": SOURCE}, env)
    script = Steps([[Call("write_file", {"file_path": str(repo / "n.txt"), "content": "n\n"})],
                    [Text("Done.")]])
    with FakeGemini(script) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        refused = cli.run(repo, "Write n.txt.")
        assert refused.returncode != 0 and not api.main_requests  # headless: no session
        skipped = cli.run(repo, "Write n.txt.", extra=["--skip-trust"])
    assert skipped.returncode == 0, skipped.stderr[-3000:]
    assert (repo / "n.txt").read_text() == "n\n"  # the call ran ...
    assert json.loads(git_wal(repo, "runs", "--json", env=env).stdout) == []  # ... unlogged

    def folder_trust() -> dict[str, Any]:
        out = git_wal(repo, "doctor", "--json", env=env, ok=(0, 1)).stdout
        [check] = [c for c in json.loads(out)["checks"] if c["check"].endswith("folder trust")]
        return dict(check)

    check = folder_trust()
    assert not check["ok"] and "--skip-trust" in check["detail"] + check["fix"]
    cli.trust(repo)
    assert folder_trust()["ok"]


@pytest.mark.slow
def test_several_calls_in_one_reply_are_logged_one_after_the_other(gemini_bin: Path,
                                                                   tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"calc.py": SOURCE}, env)
    script = Steps([
        [Call("write_file", {"file_path": str(repo / "a.txt"), "content": "a\n"}),
         Call("write_file", {"file_path": str(repo / "b.txt"), "content": "b\n"}),
         Call("run_shell_command", {"command": "echo c > c.txt"})],
        [Text("Done.")],
    ])
    with FakeGemini(script) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        cli.trust(repo)
        out = cli.run(repo, "Three at once.")
    assert out.returncode == 0, out.stderr[-3000:]
    recs = [r for r in records(repo, env) if r["type"] != "plan"]
    assert [r["type"] for r in recs] == ["intent", "commit"] * 3
    assert [r["args"]["agent"]["tool"] for r in recs[::2]] == [
        "write_file", "write_file", "run_shell_command"]
    assert [r["target"] for r in recs[:4:2]] == [["a.txt"], ["b.txt"]]
    assert all(recs[i + 1]["intent"] == recs[i]["lsn"] for i in range(0, 6, 2))
    assert (repo / "c.txt").read_text() == "c\n"


@pytest.mark.slow
def test_killed_while_waiting_for_the_model_then_resumed(gemini_bin: Path,
                                                         tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "home")
    repo = make_project(tmp_path / "repo", {"calc.py": SOURCE}, env)
    calc = str(repo / "calc.py")
    released = threading.Event()

    def first(req: Request) -> list[Call | Text]:
        if not req.function_responses():
            return [Call("replace", {"file_path": calc, "old_string": "return 0",
                                     "new_string": "return None", "instruction": "x"})]
        # The next turn is never answered: Gemini is killed while it waits for it.
        released.wait(WAIT)
        return [Text("Too late.")]

    with FakeGemini(first) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        cli.trust(repo)
        proc = cli.start(repo, "Edit calc.py.", log=tmp_path / "first.log")
        try:
            assert api.wait_for(lambda reqs: any(r.function_responses() for r in reqs
                                                 if r.is_main), WAIT), "no second turn"
            sigkill(proc)
        finally:
            released.set()
    edited = SOURCE.replace("return 0", "return None")
    assert (repo / "calc.py").read_text() == edited
    [row] = json.loads(git_wal(repo, "runs", "--json", env=env).stdout)
    run = str(row["run"])
    recs = records(repo, env)
    assert [r["type"] for r in recs] == ["plan", "intent", "commit"]  # closed before the kill

    with FakeGemini(lambda req: [Text("Nothing left to do.")]) as api:
        cli = GeminiCli(gemini_bin, tmp_path / "home", api.url)
        out = cli.run(repo, "continue", resume="latest")
        first_request = api.main_requests[0]
    assert out.returncode == 0, out.stderr[-3000:]
    assert is_resume_prompt(first_request, run), first_request.user_texts()
    assert (repo / "calc.py").read_text() == edited
    assert [r["type"] for r in records(repo, env)][:3] == ["plan", "intent", "commit"]
    assert git_wal(repo, "status", "--run", run, env=env).returncode == 0
