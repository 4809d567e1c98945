"""`git wal exec --confirm PROBE`: the probe recovery runs to decide a shell
step a crash left in doubt (0: it happened, 1: it did not, other: still in
doubt), and only when this clone wrote it."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from .conftest import ok, tree_of, wal

WRITE = ["sh", "-c",
         "echo out > out.txt; echo two > two.txt; [ -n \"$MARK\" ] && touch marker; true"]


def killed_step(repo: Path, probe: str, mark: bool) -> str:
    """A shell step (with ``probe``) SIGKILLed after its command ran; the tree before it."""
    ok(repo, "begin", "--task", "confirm")
    before = tree_of(repo)
    env = {"GITWAL_CRASH_AT": "after-exec", "MARK": "1" if mark else ""}
    proc = wal(repo, "exec", "--confirm", probe, "--", *WRITE, env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (repo / "out.txt").exists()
    return before


def recovered(repo: Path, code: int) -> dict[str, Any]:
    proc = wal(repo, "recover", "--json")
    assert proc.returncode == code, proc.stdout + proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_a_probe_that_exits_0_commits_the_step_as_found(repo: Path) -> None:
    killed_step(repo, "test -f marker", mark=True)
    found = tree_of(repo)
    data = recovered(repo, 0)
    [item] = data["intents"]
    assert (item["outcome"], item["action"]) == ("applied-missing-commit", "committed")
    assert "its confirm probe exited 0: it happened" in item["detail"]
    assert tree_of(repo) == found
    rows = [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]
    assert rows[-1]["type"] == "commit" and rows[-1]["verified"].startswith(
        "confirmed: test -f marker exited 0")


def test_a_probe_that_exits_1_puts_the_tree_back_and_keeps_what_it_held(repo: Path) -> None:
    before = killed_step(repo, "test -f marker", mark=False)
    data = recovered(repo, 0)
    [item] = data["intents"]
    assert (item["outcome"], item["action"]) == ("not-applied", "restored")
    assert "its confirm probe exited 1: it did not happen" in item["detail"]
    assert tree_of(repo) == before and not (repo / "out.txt").exists()
    [(path, tree, command)] = [(s["path"], s["object"], s["command"]) for s in item["saved"]]
    assert path == "." and "git restore --source=" in command and tree
    assert "redo" in data["prompt"]


def test_any_other_exit_leaves_it_in_doubt_and_writes_nothing(repo: Path) -> None:
    killed_step(repo, "exit 7", mark=False)
    found = tree_of(repo)
    data = recovered(repo, 3)
    [item] = data["intents"]
    assert item["open"] and "its confirm probe exited 7: still in doubt" in item["detail"]
    assert tree_of(repo) == found


def test_a_probe_this_clone_did_not_write_is_never_run(repo: Path) -> None:
    killed_step(repo, "touch probe-ran; exit 0", mark=False)
    secret = repo / ".git" / "wal" / "secret"
    secret.rename(secret.with_name("secret.moved"))  # as if the log came from elsewhere
    data = recovered(repo, 3)
    [item] = data["intents"]
    assert item["open"] and "was not written in this clone" in item["detail"]
    assert not (repo / "probe-ran").exists()


def test_an_empty_probe_is_refused_before_anything_is_logged(repo: Path) -> None:
    ok(repo, "begin")
    proc = wal(repo, "exec", "--confirm", " ", "--", "true")
    assert proc.returncode == 1 and "error: exec: --confirm needs a command" in proc.stderr
    assert [json.loads(x)["type"] for x in ok(repo, "log", "--json").splitlines()] == ["plan"]


@pytest.mark.parametrize(("mark", "point"), [
    (True, "mid-append"), (True, "after-append"),
    (False, "mid-append"), (False, "after-append"), (False, "mid-restore")])
def test_a_recovery_killed_while_acting_on_its_probe_is_finished_by_the_next(
        repo: Path, mark: bool, point: str) -> None:
    before = killed_step(repo, "test -f marker", mark=mark)
    found = tree_of(repo)
    dying = wal(repo, "recover", env={"GITWAL_CRASH_AT": point})
    assert dying.returncode == -signal.SIGKILL, dying.stdout + dying.stderr
    recovered(repo, 0)
    closings = [r for r in (json.loads(x) for x in ok(repo, "log", "--json").splitlines())
                if r["type"] in ("commit", "abort")]
    assert len(closings) == 1 and closings[0]["type"] == ("commit" if mark else "abort")
    assert tree_of(repo) == (found if mark else before)
    assert wal(repo, "verify").returncode == 0
