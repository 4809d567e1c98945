"""`git wal order --remote NAME`: one order of every run a remote holds, read
from a copy fetched for reading only, so CI can check that a branch several
machines worked on is explained by their logs (a real `git daemon` serves
the remote)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, wal
from .gitservers import GitDaemon, GitServer
from .test_remotes import _clone, _json


def _remote(server: GitServer, tmp_path: Path, guarded: bool = True) -> str:
    """A bare repository on ``server`` seeded with branch main; ``guarded``: with
    gitwal's pre-receive, which refuses deleting or rewriting a log."""
    server.add_bare("team.git", wal_hooks=guarded)
    seed = init_repo(tmp_path / "seed")
    git(seed, "push", "-q", server.url("team.git"), "main")
    return server.url("team.git")


def _write(repo: Path, path: str, text: str) -> None:
    ok(repo, "apply", "write-file", path, "--from", "-", input=text.encode())


def _order(repo: Path, *args: str, code: int = 0) -> dict[str, object]:
    return _json(repo, "order", *args, code=code)


@pytest.mark.slow
def test_the_runs_of_two_machines_are_ordered_from_the_remote(
        git_daemon: GitDaemon, tmp_path: Path) -> None:
    url = _remote(git_daemon, tmp_path)
    a = _clone(tmp_path, url, "a")
    b = _clone(tmp_path, url, "b")
    run_a = ok(a, "begin", "--task", "a's part").strip()
    _write(a, "shared.txt", "one\n")
    ok(a, "push")
    # b builds on a's step: its tree holds the bytes a's step left (as a pull
    # of a's branch would bring them).
    (b / "shared.txt").write_text("one\n")
    run_b = ok(b, "begin", "--task", "b's part").strip()
    _write(b, "shared.txt", "two\n")
    _write(b, "b.txt", "b\n")
    ok(b, "push")

    # CI: a fresh clone whose tree is what the two machines left (b's).
    ci = _clone(tmp_path, url, "ci")
    for path, text in (("shared.txt", "two\n"), ("b.txt", "b\n")):
        (ci / path).write_text(text)
    assert ok(ci, "runs").strip() == ""  # nothing of theirs is integrated here
    found = _order(ci, "--remote", "origin")
    assert found["ok"] is True and found["remote"] == "origin"
    assert found["runs"] == sorted([run_a, run_b])
    steps = found["steps"]
    assert isinstance(steps, list)
    # b's step began from the state a's step left: a's comes first.
    assert [s["run"] for s in steps if "shared.txt" in s["paths"]] == [run_a, run_b]
    assert {s["run"] for s in steps} == {run_a, run_b}
    # Read only: the fetched runs are a copy under refs/wal-remote/, no local log.
    assert git(ci, "for-each-ref", "--format=%(refname)", "refs/wal/") == ""
    assert run_a in git(ci, "for-each-ref", "--format=%(refname)", "refs/wal-remote/")

    # The tree differs from what the logs explain: named, exit 1.
    (ci / "shared.txt").write_text("someone else's\n")
    differs = _order(ci, "--remote", "origin", code=1)
    assert differs["replay_differs"] == ["shared.txt"]


@pytest.mark.slow
def test_two_machines_changing_one_state_are_a_fork_on_the_remote(
        git_daemon: GitDaemon, tmp_path: Path) -> None:
    url = _remote(git_daemon, tmp_path)
    a = _clone(tmp_path, url, "a")
    b = _clone(tmp_path, url, "b")
    for repo, text in ((a, "from a\n"), (b, "from b\n")):
        ok(repo, "begin", "--task", f"edit {repo.name}")
        _write(repo, "README", text)  # both from the seed's README: one update lost
        ok(repo, "push")
    found = _order(a, "--remote", "origin", "--no-replay", code=1)
    conflicts = found["conflicts"]
    assert isinstance(conflicts, list) and [c["kind"] for c in conflicts] == ["fork"]
    assert conflicts[0]["path"] == "README"


def test_an_unknown_remote_is_an_error_with_a_hint(repo: Path) -> None:
    proc = wal(repo, "order", "--remote", "nowhere")
    assert proc.returncode != 0
    assert "error:" in proc.stderr and "hint:" in proc.stderr
    assert "Traceback" not in proc.stderr
