"""`git wal resolve LSN --applied|--not-applied`: a person closes a step in
doubt, the record says who and why, and nothing in the tree is overwritten."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from gitwal import Wal

from .conftest import git, ok, tree_of, wal
from .test_json_schema import check

EXEC_TWO_FILES = ["exec", "--", "sh", "-c", "echo one > one.txt; echo two > README"]


def in_doubt(repo: Path) -> int:
    """A run whose shell step was killed after it ran: recover leaves it open (exit 3)."""
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.org")
    ok(repo, "begin", "--task", "decide")
    killed = wal(repo, *EXEC_TWO_FILES, env={"GITWAL_CRASH_AT": "after-exec"})
    assert killed.returncode == -signal.SIGKILL
    first = wal(repo, "recover", "--json")
    assert first.returncode == 3, first.stderr
    lsn: int = json.loads(first.stdout)["intents"][0]["lsn"]
    return lsn


def last_record(repo: Path) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]
    return rows[-1]


def test_applied_commits_the_tree_as_found_and_says_who_and_why(repo: Path) -> None:
    lsn = in_doubt(repo)
    found = tree_of(repo)
    out = wal(repo, "resolve", str(lsn), "--yes", "--applied", "--note",
              "I ran it; both files are right",
              "--json")
    assert out.returncode == 0, out.stderr
    done = check(json.loads(out.stdout), "resolve")
    assert done["decision"] == "applied" and done["lsn"] == lsn
    assert done["decided_by"] == "Ada Lovelace <ada@example.org>"
    assert tree_of(repo) == found  # nothing written
    rec = last_record(repo)
    assert rec["type"] == "commit" and rec["intent"] == lsn
    assert rec["decided_by"] == "Ada Lovelace <ada@example.org>"
    assert rec["note"] == "I ran it; both files are right"
    assert Wal(repo).status().open == ()

    report = wal(repo, "recover", "--json")
    assert report.returncode == 0, report.stderr
    data = check(json.loads(report.stdout), "recover")
    assert data["decided"] == [{"lsn": lsn, "tool": "exec", "target": ["."],
                                "decision": "applied", "decided_by": done["decided_by"],
                                "note": "I ran it; both files are right"}]
    assert (f"LSN {lsn} (" in data["prompt"] and "decided applied by a person, Ada Lovelace "
            "<ada@example.org>: I ran it; both files are right" in data["prompt"])
    # The step's changes are now committed: no drift, and the next step may run.
    assert data["drift"] == []
    ok(repo, "apply", "ensure-line", "one.txt", "three")


def test_not_applied_aborts_leaves_every_byte_and_asks_for_the_step_again(repo: Path) -> None:
    lsn = in_doubt(repo)
    found = tree_of(repo)
    out = ok(repo, "resolve", str(lsn), "--not-applied", "--yes")
    assert f"LSN {lsn} of run" in out and "not applied" in out and "Ada Lovelace" in out
    assert tree_of(repo) == found and (repo / "one.txt").read_text() == "one\n"
    rec = last_record(repo)
    assert rec["type"] == "abort" and rec["intent"] == lsn and "note" not in rec
    report = json.loads(ok(repo, "recover", "--json"))
    assert report["decided"][0]["decision"] == "not-applied"
    assert "decided not applied by a person" in report["prompt"]
    assert f"redo LSN {lsn}" in report["prompt"]  # still to be done


def test_refusals_append_nothing(repo: Path) -> None:
    lsn = in_doubt(repo)
    head = git(repo, "for-each-ref", "--format=%(objectname)", "refs/wal/").strip()

    neither = wal(repo, "resolve", str(lsn))
    assert neither.returncode == 2 and "--applied or --not-applied" in neither.stderr
    both = wal(repo, "resolve", str(lsn), "--applied", "--not-applied")
    assert both.returncode == 2 and "one of them" in both.stderr
    closed = wal(repo, "resolve", "1", "--applied")
    assert closed.returncode == 1 and "LSN 1 is not an open intent" in closed.stderr
    assert "hint: `git wal status` lists the open ones" in closed.stderr
    inside = wal(repo, "resolve", str(lsn), "--applied", env={"CLAUDECODE": "1"})
    assert inside.returncode == 1 and "records a person's decision" in inside.stderr
    assert "hint: ask the user to run it in a terminal" in inside.stderr
    assert git(repo, "for-each-ref", "--format=%(objectname)", "refs/wal/").strip() == head


def test_a_file_step_decided_applied_keeps_the_bytes_it_accepts(repo: Path) -> None:
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.org")
    ok(repo, "begin")
    killed = wal(repo, "apply", "write-file", "w.txt", "--from", "-", input=b"planned\n",
                 env={"GITWAL_CRASH_AT": "after-intent"})
    assert killed.returncode == -signal.SIGKILL
    (repo / "w.txt").write_text("what a person wrote instead\n")  # neither pre nor post
    assert wal(repo, "recover").returncode == 3
    ok(repo, "resolve", "2", "--applied", "--yes")
    rec = last_record(repo)
    blob = rec["post"][0]
    assert git(repo, "cat-file", "-p", blob) == "what a person wrote instead\n"
    assert (repo / "w.txt").read_text() == "what a person wrote instead\n"
