"""Irreversible steps behind a person's approval (gitwal/decisions/approvals.py):
logged first, refused until approved (exit 3), run exactly once, split from
reversible work by a checkpoint; a pending approval survives SIGKILL."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, ok, wal
from .test_json_schema import check

PUSH = ["exec", "--irreversible", "--", "sh", "-c", "echo pushed >> pushes.log"]


def records(repo: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]


def pushes(repo: Path) -> int:
    log = repo / "pushes.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def ready(repo: Path) -> None:
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.org")
    ok(repo, "begin", "--task", "release")


def test_logged_refused_until_approved_then_run_exactly_once(repo: Path) -> None:
    ready(repo)
    first = wal(repo, *PUSH)
    assert first.returncode == 3 and pushes(repo) == 0
    assert "error: LSN 2 exec sh -c 'echo pushed >> pushes.log': logged as irreversible" \
        in first.stderr
    assert "hint: ask the user to run `git wal approve 2`" in first.stderr
    again = wal(repo, *PUSH)  # asking again neither runs it nor logs a second intent
    assert again.returncode == 3 and "LSN 2 is waiting for a person's approval" in again.stderr
    # Waiting for a person, not interrupted: every other step says so.
    for argv in (("apply", "ensure-line", "README", "x"), ("claim", "README"),
                 ("exec", "--", "true")):
        other = wal(repo, *argv)
        assert other.returncode == 1 and "still open" not in other.stderr, argv
        assert "irreversible step waiting for a person's approval" in other.stderr, argv
        assert "git wal approve 2" in other.stderr, argv

    approved = check(json.loads(ok(repo, "approve", "2", "--yes", "--note", "release reviewed",
                                   "--json")),
                     "approve")
    assert approved == {"run": approved["run"], "lsn": 2, "record": 3,
                        "approved_by": "Ada <ada@example.org>", "note": "release reviewed"}
    rec = check(records(repo)[-1], "log_line")
    assert rec["type"] == "approval" and rec["intent"] == 2 and rec["note"] == "release reviewed"
    twice = wal(repo, "approve", "2", "--yes")
    assert twice.returncode == 1 and "LSN 2 is not an irreversible step waiting" not in \
        twice.stderr and "approved already" in twice.stderr

    ok(repo, *PUSH)
    assert pushes(repo) == 1
    assert [r["type"] for r in records(repo)] == ["plan", "intent", "approval", "commit"]
    assert wal(repo, "verify").returncode == 0
    # Once run, the same command is a new step: logged and waiting again.
    assert wal(repo, *PUSH).returncode == 3 and pushes(repo) == 1


def test_reversible_steps_must_be_behind_a_checkpoint_first(repo: Path) -> None:
    ready(repo)
    ok(repo, "apply", "ensure-line", "README", "x")
    refused = wal(repo, *PUSH)
    assert refused.returncode == 1
    assert "1 reversible step(s) since the newest checkpoint (LSN 2)" in refused.stderr
    assert "hint: split reversible from irreversible" in refused.stderr
    assert [r["type"] for r in records(repo)] == ["plan", "intent", "commit"]
    assert wal(repo, "exec", "--irreversible", "--allow-uncheckpointed", "--", "true"
               ).returncode == 3
    ok(repo, "resolve", "4", "--not-applied", "--yes")
    ok(repo, "checkpoint", "-m", "reversible work")
    assert wal(repo, *PUSH).returncode == 3  # now it may wait for its approval


def test_a_pending_approval_survives_a_crash_and_the_resume_prompt_names_it(
        repo: Path) -> None:
    ready(repo)
    killed = wal(repo, *PUSH, env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL
    rec = wal(repo, "recover", "--json")
    assert rec.returncode == 3
    data = json.loads(rec.stdout)
    [item] = data["intents"]
    assert (item["outcome"], item["action"], item["open"]) == (
        "awaiting-approval", "left-open", True)
    assert "ask the user to run `git wal approve 2`" in data["prompt"]
    assert wal(repo, "recover", "--redo").returncode == 3 and pushes(repo) == 0  # not approved

    ok(repo, "approve", "2", "--yes")
    prompt = ok(repo, "prompt")
    assert "LSN 2 is approved and has not run" in prompt
    done = json.loads(ok(repo, "recover", "--redo", "--json"))
    assert done["intents"][0]["action"] == "redone" and pushes(repo) == 1
    assert json.loads(ok(repo, "recover", "--redo", "--json"))["intents"] == []
    assert pushes(repo) == 1


@pytest.mark.parametrize("point", ["after-append", "after-exec", "after-verify"])
def test_the_approved_step_never_runs_twice_whatever_the_crash(repo: Path,
                                                               point: str) -> None:
    ready(repo)
    assert wal(repo, *PUSH).returncode == 3
    ok(repo, "approve", "2", "--yes")
    killed = wal(repo, *PUSH, env={"GITWAL_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ran = pushes(repo)
    assert ran <= 1
    for _ in range(2):  # recovering, redoing, and asking again run it at most once in all
        wal(repo, "recover", "--redo")
        wal(repo, *PUSH)
    assert pushes(repo) <= 1
    if ran == 1:  # it ran before the kill: never again
        assert pushes(repo) == 1


def test_approve_is_a_persons_and_names_only_a_waiting_step(repo: Path) -> None:
    ready(repo)
    ok(repo, "apply", "ensure-line", "README", "x")
    nothing = wal(repo, "approve", "2", "--yes")
    assert nothing.returncode == 1 and "LSN 2 is not an irreversible step waiting" in \
        nothing.stderr
    ok(repo, "checkpoint", "-m", "cp")
    assert wal(repo, *PUSH).returncode == 3
    inside = wal(repo, "approve", "5", env={"CLAUDECODE": "1"})
    assert inside.returncode == 1 and "records a person's approval" in inside.stderr
    assert records(repo)[-1]["type"] == "intent"


@pytest.mark.parametrize("point", ["mid-append", "after-append"])  # a decision's only points
@pytest.mark.parametrize("command", [["approve", "2", "--yes"],
                                     ["resolve", "2", "--not-applied", "--yes"]])
def test_a_decision_killed_mid_append_is_there_once_or_not_at_all(
        repo: Path, command: list[str], point: str) -> None:
    ready(repo)
    assert wal(repo, *PUSH).returncode == 3
    killed = wal(repo, *command, env={"GITWAL_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL
    kinds = [r["type"] for r in records(repo)]
    assert kinds in (["plan", "intent"], ["plan", "intent", kinds[-1]])
    again = wal(repo, *command)  # the person says it again: recorded once in all
    assert again.returncode in (0, 1), again.stderr
    kinds = [r["type"] for r in records(repo)]
    assert kinds == ["plan", "intent", "approval" if command[0] == "approve" else "abort"]
    assert wal(repo, "verify").returncode == 0
