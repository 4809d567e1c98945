"""The hook payloads Codex CLI 0.169.0 really sent (tests/fixtures/codex-0.169.0/,
recorded from the pinned binary, temp paths scrubbed), fed to the adapter and
then to `git wal hook codex` in a real repository.

tests/e2e/test_codex.py checks that the live binary still sends these keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import codex
from gitwal.agents.actions import Close, FileStep, SessionStart, ShellStep, TurnEnd
from gitwal.records.model import calling_agent

from .conftest import git, wal
from .test_agent_payloads import run_hook, wal_log

FIXTURES = Path(__file__).parent / "fixtures" / "codex-0.169.0"
SCRUBBED = "/tmp/codex-e2e/repo"  # the recorded repository's path in the fixtures


def fixture(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    assert isinstance(data, dict)
    return data


def test_every_fixture_maps_to_the_action_it_stands_for() -> None:
    actions = {name: codex.action(fixture(name)["hook_event_name"], fixture(name))
               for name in ("session-start", "pre-tool-use-bash", "post-tool-use-bash",
                            "pre-tool-use-apply-patch", "post-tool-use-apply-patch", "stop")}
    assert actions["session-start"] == SessionStart("startup")
    assert isinstance(actions["stop"], TurnEnd)
    shell = actions["pre-tool-use-bash"]
    assert isinstance(shell, ShellStep)
    assert shell.command == fixture("pre-tool-use-bash")["tool_input"]["command"]
    closed = actions["post-tool-use-bash"]
    # The real shell payload carries the output only, not the exit status (3).
    assert isinstance(closed, Close) and closed.paths == () and closed.error is None
    assert closed.outcome == "finished"
    assert closed.call == shell.call and closed.call.call_id == "call_e2e_00001"
    patch = actions["pre-tool-use-apply-patch"]
    assert isinstance(patch, FileStep) and patch.paths == ("a.txt", "b.txt")
    assert patch.compute(["a.txt", "b.txt"])((b"one\ntwo\nthree\n", None)) == (
        b"one\nTWO\nthree\n", b"bee\n")
    after = actions["post-tool-use-apply-patch"]
    assert isinstance(after, Close) and after.paths == ("a.txt", "b.txt")
    assert after.call == patch.call


@pytest.mark.parametrize(("response", "said"), [
    ("hi\n", "finished"),
    ("Exit code: 3\nWall time: 0 seconds\nOutput:\n", "exit code 3"),
    ({"output": "", "exit_code": 7}, "exit code 7"),
    ({"exit_code": True}, "finished"),
    (None, "finished"),
])
def test_a_shell_outcome_is_what_the_response_says(response: Any, said: str) -> None:
    assert codex.outcome(response) == said


def _as_here(payload: dict[str, Any], repo: Path) -> dict[str, Any]:
    here = json.loads(json.dumps(payload).replace(SCRUBBED, str(repo)))
    assert isinstance(here, dict)
    return here


@pytest.mark.slow
def test_the_recorded_session_replayed_through_the_hook(repo: Path) -> None:
    """The fixtures in the order Codex sent them: the shell call is committed as
    "finished", the patch as one write_files intent whose commit matches it."""
    (repo / "a.txt").write_text("one\ntwo\nthree\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "seed")
    run = f"codex-{fixture('session-start')['session_id']}"
    for name in ("session-start", "pre-tool-use-bash"):
        assert run_hook(repo, "codex", _as_here(fixture(name), repo)).code == 0
    (repo / "envseen.txt").write_text("CODEX_TOOL_CALL_ID=call_e2e_00001\n")  # its effect
    assert run_hook(repo, "codex", _as_here(fixture("post-tool-use-bash"), repo)).code == 0
    assert run_hook(repo, "codex", _as_here(fixture("pre-tool-use-apply-patch"), repo)).code == 0
    (repo / "a.txt").write_text("one\nTWO\nthree\n")
    (repo / "b.txt").write_text("bee\n")
    for name in ("post-tool-use-apply-patch", "stop"):
        assert run_hook(repo, "codex", _as_here(fixture(name), repo)).code == 0
    recs = wal_log(repo, run)
    intents = [r for r in recs if r["type"] == "intent"]
    assert [i["tool"] for i in intents] == ["exec", "write_files"]
    assert intents[1]["target"] == ["a.txt", "b.txt"]
    commits = {r["intent"]: r for r in recs if r["type"] == "commit"}
    assert commits[intents[0]["lsn"]]["verified"].startswith("finished (codex PostToolUse")
    patch_commit = commits[intents[1]["lsn"]]
    assert patch_commit["post"] == intents[1]["post"]


@pytest.mark.parametrize("var", ["CODEX_TOOL_CALL_ID", "CODEX_THREAD_ID", "CODEX_SESSION_ID"])
def test_codex_tool_calls_are_known_by_what_codex_exports(var: str) -> None:
    assert calling_agent({var: "call_e2e_00001"}) == "codex"
    assert calling_agent({var: ""}) is None


@pytest.mark.slow
def test_recover_inside_codex_own_shell_call_refuses_to_decide_it(repo: Path) -> None:
    """`git wal recover` run through Codex's shell tool, which exports
    CODEX_TOOL_CALL_ID: the open Bash intent is that very call, still running."""
    pre = _as_here(fixture("pre-tool-use-bash"), repo)
    run = f"codex-{pre['session_id']}"
    assert run_hook(repo, "codex", pre).code == 0
    before = wal_log(repo, run)
    inside = wal(repo, "recover", "--run", run, env={"CODEX_TOOL_CALL_ID": pre["tool_use_id"]})
    assert inside.returncode == 1, inside.stderr
    assert inside.stderr.startswith(
        f"error: run {run}: LSN {before[-1]['lsn']} is a Bash call of codex that has not "
        "finished, and this recovery runs inside a codex tool call")
    assert wal_log(repo, run) == before  # nothing decided, nothing appended
