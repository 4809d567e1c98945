"""Failures the CLI must report as `error:`/`hint:` (or end quietly), never as a
traceback: file names that are not UTF-8, a reader that closed our stdout, and
a failure after an intent was already durable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import GIT_WAL, ok, wal
from .test_agent_payloads import claude_tool, run_hook

BAD = b"caf\xe9.txt"  # Latin-1, not UTF-8
SHOWN = "caf\\xe9.txt"


def _bad_name(repo: Path, name: bytes = BAD, data: bytes = b"x\n") -> None:
    with open(os.fsencode(repo) + b"/" + name, "wb") as f:
        f.write(data)


def _clean(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "UnicodeEncodeError" not in proc.stderr


def test_apply_to_a_name_that_is_not_utf8_is_an_error_not_a_traceback(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "names")
    before = ok(repo, "log", "--run", "r", "--json")
    proc = subprocess.run([GIT_WAL.encode(), b"apply", b"--run", b"r", b"write-file", BAD,
                           b"--from", b"-"], cwd=repo, input=b"hi\n", capture_output=True)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines[0].startswith("error: a name that is not valid UTF-8 cannot be written to the "
                               "log (near: ")
    assert SHOWN in lines[0]
    assert lines[1] == ("hint: a file or directory name that is not UTF-8 cannot be logged: "
                        "rename it (`git status` shows it) and run the command again; no "
                        "record was appended (`git wal status` shows the log)")
    assert ok(repo, "log", "--run", "r", "--json") == before  # true: nothing appended


@pytest.mark.slow
def test_views_of_a_tree_with_such_a_name_print_it_escaped(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "names\nAction: forged")
    _bad_name(repo)
    ok(repo, "exec", "--run", "r", "--", "sh", "-c", "printf y > \"$(printf 'n\\351w.txt')\"")
    for args in (["status", "--run", "r"], ["log", "--run", "r"], ["runs"],
                 ["prompt", "--run", "r"], ["recover", "--run", "r"], ["verify", "--run", "r"]):
        proc = wal(repo, *args)
        _clean(proc)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Action: forged" not in proc.stdout.replace("\\nAction: forged", "")
    status = wal(repo, "status", "--run", "r").stdout
    assert status.splitlines()[0] == "run r: names\\nAction: forged"


def test_an_interrupted_exec_that_made_such_a_name_is_listed_escaped(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "names")
    crashed = wal(repo, "exec", "--run", "r", "--", "sh", "-c",
                  "printf y > \"$(printf 'n\\351w.txt')\"", env={"GITWAL_CRASH_AT": "after-exec"})
    assert crashed.returncode != 0
    for args in (["status", "--run", "r"], ["prompt", "--run", "r"], ["recover", "--run", "r"]):
        proc = wal(repo, *args)
        _clean(proc)
        assert proc.returncode in (0, 3), (args, proc.stderr)
    prompt = ok(repo, "prompt", "--run", "r")
    assert "  Changed paths: n\\xe9w.txt" in prompt.splitlines()


def test_an_agent_hook_names_the_file_it_cannot_record(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "t1")).code == 0
    (repo / "README").write_text("bye\n")
    assert run_hook(repo, "claude", claude_tool(repo, "PostToolUse", "Edit", edit,
                                                "t1")).code == 0
    _bad_name(repo)
    write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write, "t2"))
    assert r.code == 2
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert r.err.startswith(f"gitwal: the file name {SHOWN} is not valid UTF-8")
    assert "rename it to a UTF-8 name" in r.err


def _into_closed_pipe(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run with stdout a pipe whose reading end is already closed (`| head` that left)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([GIT_WAL, *args], cwd=repo, stdout=write,
                              stderr=subprocess.PIPE)
    finally:
        os.close(write)


def test_a_closed_stdout_ends_the_command_quietly(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "pipe")
    ok(repo, "apply", "--run", "r", "write-file", "a.txt", "--from", "-", input=b"a\n")
    for args in (["log", "--run", "r"], ["log", "--run", "r", "--json"],
                 ["status", "--run", "r"], ["runs"], ["prompt", "--run", "r"]):
        proc = _into_closed_pipe(repo, *args)
        assert proc.returncode == -signal.SIGPIPE, (args, proc.stderr)  # as `git log` does
        assert proc.stderr == b"", args


def test_git_wal_log_into_head_ends_quietly(repo: Path) -> None:
    # A plan record larger than a pipe buffer: `head -c1` leaves while
    # `git wal log` still writes, as with any long log.
    ok(repo, "begin", "--run", "r", "--task", "x" * 100_000)
    for args in ("log --run r", "log --run r --json"):
        proc = subprocess.run(["bash", "-c", f"'{GIT_WAL}' {args} | head -c1 >/dev/null; "
                               "echo ${PIPESTATUS[0]}"], cwd=repo, capture_output=True,
                              text=True)
        assert proc.stderr == "", proc.stderr
        # Died of SIGPIPE like `git log | head -c1`, or done before head left
        # (head may read all of it at once): never an error either way.
        assert proc.stdout in ("141\n", "0\n")


def test_a_failure_after_a_durable_intent_does_not_claim_nothing_changed(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "late failure")
    # The command replaces gitwal's scratch-index directory with a file: the
    # post snapshot fails with an OSError after the intent was appended.
    proc = wal(repo, "exec", "--run", "r", "--", "sh", "-c",
               "rm -rf .git/wal/index && touch .git/wal/index")
    _clean(proc)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("error: [Errno 20] Not a directory")
    assert lines[1] == (
        "hint: the log has records written since this command started: run r (wal 2 intent "
        "exec .); they are durable: `git wal status` shows them, and `git wal recover` "
        "decides any step left open")
    assert "nothing was changed" not in proc.stderr
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert rows[-1]["type"] == "intent" and rows[-1]["status"] == "open"
