"""Progress of long work (gitwal/base/progress.py): one status line on a terminal's
stderr, erased at the end; nothing off a terminal, and nothing for quick work.

``GITWAL_PROGRESS_DELAY`` sets how long work lasts before its line appears:
0 here, so every test sees the line without depending on the machine's speed
(and 3600 where the point is that quick work shows none)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from .conftest import GIT_WAL, git, init_repo, ok

ERASE = b"\r\x1b[K"


def on_terminal(repo: Path, *args: str, delay: str = "0",
                term: str = "xterm") -> tuple[subprocess.CompletedProcess[str], bytes]:
    """git-wal with stderr a terminal (a pty): the result, and what reached the terminal."""
    master, slave = pty.openpty()
    env = {**os.environ, "GITWAL_PROGRESS_DELAY": delay, "TERM": term}
    try:
        proc = subprocess.run([GIT_WAL, *args], cwd=repo, stderr=slave, stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, env=env)
    finally:
        os.close(slave)
    shown = b""
    try:
        while chunk := os.read(master, 65536):
            shown += chunk
    except OSError:  # EIO: the terminal's other end is closed and drained
        pass
    os.close(master)
    return proc, shown


def test_a_snapshot_shows_its_progress_and_erases_it(repo: Path) -> None:
    ok(repo, "begin", "--task", "progress")
    proc, shown = on_terminal(repo, "exec", "--", "sh", "-c", "echo x > made.txt")
    assert proc.returncode == 0, shown
    assert b"gitwal: snapshotting the working tree" in shown
    assert shown.endswith(ERASE)  # the terminal is left as it was


def test_no_line_off_a_terminal_on_a_dumb_one_or_for_quick_work(repo: Path) -> None:
    ok(repo, "begin", "--task", "progress")
    piped = subprocess.run([GIT_WAL, "exec", "--", "sh", "-c", "echo a > a.txt"], cwd=repo,
                           capture_output=True, text=True,
                           env={**os.environ, "GITWAL_PROGRESS_DELAY": "0"})
    assert piped.returncode == 0 and "\x1b[K" not in piped.stderr
    proc, shown = on_terminal(repo, "exec", "--", "sh", "-c", "echo b > b.txt", term="dumb")
    assert proc.returncode == 0 and b"\x1b[K" not in shown, shown
    proc, shown = on_terminal(repo, "exec", "--", "sh", "-c", "echo c > c.txt", delay="3600")
    assert proc.returncode == 0 and b"\x1b[K" not in shown, shown


def test_push_and_fetch_show_gits_progress_and_still_report_each_ref(tmp_path: Path) -> None:
    server = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    seed = init_repo(tmp_path / "seed")
    git(seed, "push", "-q", str(server), "main")
    git(tmp_path, "clone", "-q", server.as_uri(), "a")
    a = tmp_path / "a"
    run = ok(a, "begin", "--task", "push me").strip()
    ok(a, "apply", "write-file", "p.txt", "--from", "-", input=b"p\n")

    proc, shown = on_terminal(a, "push", "--json")
    assert proc.returncode == 0, shown
    assert b"gitwal: pushing to origin" in shown and b"objects:" in shown, shown
    assert shown.endswith(ERASE)
    refs = {r["ref"]: r["status"] for r in json.loads(proc.stdout)["refs"]}
    assert refs == {f"refs/wal/{run}": "created"}  # git's porcelain output, parsed as ever

    git(tmp_path, "clone", "-q", server.as_uri(), "b")
    proc, shown = on_terminal(tmp_path / "b", "fetch", "--json")
    assert proc.returncode == 0, shown
    assert b"gitwal: fetching from origin" in shown and shown.endswith(ERASE), shown
    assert git(tmp_path / "b", "rev-parse", f"refs/wal/{run}").strip() == git(
        a, "rev-parse", f"refs/wal/{run}").strip()


def test_a_failed_push_still_names_gits_error(tmp_path: Path) -> None:
    a = init_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(tmp_path / "missing.git"))
    ok(a, "begin", "--task", "nowhere")
    ok(a, "apply", "write-file", "n.txt", "--from", "-", input=b"n\n")
    proc, shown = on_terminal(a, "push")
    assert proc.returncode == 1
    assert b"error: git push to origin failed:" in shown
    assert b"does not appear to be a git repository" in shown, shown
