"""The views for people: `git wal log` as a timeline of steps, `git wal show
LSN` with its diff, colour and the pager by git's rules, and a hostile log
printed escaped (it cannot drive the terminal nor run anything)."""

from __future__ import annotations

import json
import os
import pty
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .conftest import GIT_WAL, git, ok, wal
from .test_log_trust import RUN, append_raw, blob, canonical, intent, victim  # noqa: F401

UTC = {"TZ": "UTC"}


def append_times(repo: Path, run: str) -> dict[int, int]:
    """LSN of each append's last record -> its committer date (`git log`)."""
    out = {}
    for line in git(repo, "log", "--format=%ct %s", f"refs/wal/{run}").splitlines():
        when, _wal, lsn, _rest = line.split(" ", 3)
        out[int(lsn)] = int(when)
    return out


def line(times: dict[int, int], lsn: int, label: str, text: str, took: str = "") -> str:
    """One timeline line: LSN, time (UTC here), label, duration, text."""
    shown = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(times[lsn]))
    return f"{lsn:>6}  {shown}  {label:<10} {took:>6}  {text}"


def rows(repo: Path, run: str) -> dict[int, dict[str, Any]]:
    return {r["lsn"]: r for r in map(json.loads, ok(repo, "log", "--run", run,
                                                      "--json").splitlines())}


def a_run_of_every_kind(repo: Path) -> None:
    """Plan; committed write (step 1); committed exec with a check (step 2);
    aborted write; checkpoint; a write a crash left open (LSNs 1 to 9)."""
    ok(repo, "begin", "--run", "r", "--task", "views", "--step", "one", "--step", "two")
    ok(repo, "apply", "--step", "1", "write-file", "a.txt", "--from", "-", input=b"a\n")
    ok(repo, "exec", "--step", "2", "--check", "true", "--", "sh", "-c", "echo x > b.txt")
    assert wal(repo, "apply", "--check", "false", "write-file", "c.txt", "--from", "-",
               input=b"c\n").returncode == 1
    ok(repo, "checkpoint")
    crashed = wal(repo, "apply", "write-file", "d.txt", "--from", "-", input=b"d\n",
                  env={"GITWAL_CRASH_AT": "after-intent"})
    assert crashed.returncode == -signal.SIGKILL


def test_log_is_one_line_per_step_with_time_outcome_and_duration(repo: Path) -> None:
    a_run_of_every_kind(repo)
    t, r = append_times(repo, "r"), rows(repo, "r")

    def took(lsn: int, closing: int) -> str:
        return f"{t[closing] - t[lsn]}s"

    base, cp = r[1]["base"], r[8]["git"]
    expected = [
        line(t, 1, "plan", f"views (on main, base {base[:12]}, 2 steps)"),
        line(t, 2, "committed", "step 1  write_file a.txt", took(2, 3)),
        line(t, 4, "committed", "step 2  exec sh -c 'echo x > b.txt'  check: true", took(4, 5)),
        line(t, 6, "aborted", f"write_file c.txt  check: false  ({r[7]['reason']})",
             took(6, 7)),
        line(t, 8, "checkpoint", f"{cp[:12]} on refs/heads/main covers 4"),
        line(t, 9, "open", "write_file d.txt"),
    ]
    proc = wal(repo, "log", "--run", "r", env=UTC)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == expected
    assert r[7]["reason"].startswith("check failed")

    # --records: the closing records on lines of their own; the intents' lines
    # no longer repeat the abort's reason.
    per_record = wal(repo, "log", "--run", "r", "--records", env=UTC).stdout.splitlines()
    assert per_record == [
        expected[0], expected[1],
        line(t, 3, "commit", f"closes 2: {r[3]['verified']}"),
        expected[2],
        line(t, 5, "commit", f"closes 4: {r[5]['verified']}"),
        line(t, 6, "aborted", "write_file c.txt  check: false", took(6, 7)),
        line(t, 7, "abort", f"closes 6: {r[7]['reason']}"),
        expected[4], expected[5],
    ]

    # The open step's change is the one its intent predicted.
    opened = wal(repo, "show", "9", env=UTC).stdout.splitlines()
    assert opened[:3] == [expected[5], "target: d.txt",
                          "closed: not yet (`git wal recover` decides a step a crash left open)"]
    assert opened[-4:] == ["--- /dev/null", "+++ b/d.txt", "@@ -0,0 +1 @@", "+d"]


def test_an_exec_a_crash_left_after_its_command_ran_is_in_doubt(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "doubt")
    crashed = wal(repo, "exec", "--", "sh", "-c", "echo y > y.txt",
                  env={"GITWAL_CRASH_AT": "after-exec"})
    assert crashed.returncode == -signal.SIGKILL
    t = append_times(repo, "r")
    assert wal(repo, "log", env=UTC).stdout.splitlines()[-1] == line(
        t, 2, "in doubt", "exec sh -c 'echo y > y.txt'")


def test_show_a_file_step_prints_its_record_closing_and_diff(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "show")
    ok(repo, "apply", "write-file", "README", "--from", "-", input=b"hello\nworld\n")
    t, r = append_times(repo, "r"), rows(repo, "r")
    pre, post = r[2]["pre"][0], r[2]["post"][0]
    proc = wal(repo, "show", "2", env=UTC)
    assert (proc.returncode, proc.stderr) == (0, "")
    closed = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t[3]))
    assert proc.stdout.splitlines() == [
        line(t, 2, "committed", "write_file README", f"{t[3] - t[2]}s"),
        "target: README",
        f"closed: commit LSN 3 at {closed}: hash==post",
        "",
        "diff --git a/README b/README",
        f"index {pre[:7]}..{post[:7]} 100644",
        "--- a/README",
        "+++ b/README",
        "@@ -1 +1,2 @@",
        " hello",
        "+world",
    ]
    # The LSN of its commit shows the same step.
    assert wal(repo, "show", "3", env=UTC).stdout == proc.stdout
    doc = json.loads(ok(repo, "show", "2", "--json"))
    assert doc["record"] == r[2] and doc["closing"] == r[3]
    assert doc["changes"] == [{"path": "README", "pre": pre, "post": post, "binary": False,
                               "diff": "\n".join(proc.stdout.splitlines()[4:]) + "\n"}]


def test_show_an_exec_step_lists_the_paths_it_changed(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "show")
    (repo / "gone.txt").write_text("bye\n")
    (repo / "bin.dat").write_bytes(b"\0\1")
    command = "rm gone.txt; printf 'new\\n' > new.txt; printf '\\0\\2' > bin.dat"
    ok(repo, "exec", "--", "sh", "-c", command)
    out = ok(repo, "show", "2", "--no-color").splitlines()
    assert out[1:7] == [f"command: {shlex.join(['sh', '-c', command])}", out[2],
                        "changed: 3 path(s)", "    bin.dat", "    gone.txt", "    new.txt"]
    assert out[2].startswith("closed: commit LSN 3 at ")
    text = "\n".join(out)
    assert "Binary files a/bin.dat and b/bin.dat differ" in text
    assert "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye" in text
    assert "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new" in text
    doc = json.loads(ok(repo, "show", "2", "--json"))
    changes = {c["path"]: c for c in doc["changes"]}
    assert sorted(changes) == ["bin.dat", "gone.txt", "new.txt"]
    assert changes["bin.dat"]["binary"] is True and changes["bin.dat"]["diff"] is None
    assert changes["new.txt"]["pre"] == "absent" and changes["gone.txt"]["post"] == "absent"


def test_show_of_an_lsn_the_run_does_not_hold_is_an_error_with_a_hint(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "show")
    proc = wal(repo, "show", "7")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ("error: run r has no record with LSN 7\n"
                           "hint: `git wal log --run r --all` lists its records\n")
    doc = json.loads(wal(repo, "show", "7", "--json").stdout)
    assert (doc["kind"], doc["exit_code"]) == ("UnknownLsn", 1)
    assert wal(repo, "show", "0").returncode == 2  # not an LSN at all: a usage error


def test_a_hostile_log_is_printed_escaped_and_runs_nothing(victim: Path) -> None:  # noqa: F811
    # Forged with plumbing: a file step whose path and content hold terminal
    # escapes, committed; then an exec whose command and check would write
    # next to the marker if anything ran them.
    path = "e\x1b]0;owned\x07\x1b[2Jvil.txt"
    content = blob(victim, b"ok\n\x1b[31mred\x1b[0m\n")
    append_raw(victim, RUN, 4, canonical(intent(4, "write_file", {"path": path,
               "content": content}, [path], ["absent"], [content], [0])))
    append_raw(victim, RUN, 5, canonical({"v": 1, "type": "commit", "run": RUN, "lsn": 5,
                                          "intent": 4, "post": [content],
                                          "verified": "\x1b[2Jhash==post",
                                          "recovered": False}), (content,))
    ran = victim.parent / "forged-ran"
    append_raw(victim, RUN, 6, canonical(intent(
        6, "exec", {"argv": ["sh", "-c", "touch ../forged-ran\x1b[8m"]}, ["."],
        [git(victim, "write-tree").strip()], None, [0o40000], check="touch ../forged-ran")))
    outputs = [wal(victim, *args) for args in (
        ["log", "--run", RUN], ["log", "--run", RUN, "--records"],
        ["show", "4", "--run", RUN], ["show", "6", "--run", RUN])]
    for proc in outputs:
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, proc.stdout
    log, records, shown, shown_exec = (p.stdout for p in outputs)
    assert "write_file e\\x1b]0;owned\\x07\\x1b[2Jvil.txt" in log
    assert "exec sh -c 'touch ../forged-ran\\x1b[8m'  check: touch ../forged-ran" in log
    assert "closes 4: \\x1b[2Jhash==post" in records
    assert "+\\x1b[31mred\\x1b[0m" in shown
    assert '+++ "b/e\\033]0;owned\\a\\033[2Jvil.txt"' in shown  # git quotes such a name
    assert "command: sh -c 'touch ../forged-ran\\x1b[8m'" in shown_exec
    assert not ran.exists()
    assert (victim.parent / "marker.txt").read_text() == "precious, not gitwal's\n"


# -- colour and the pager ---------------------------------------------------------


# The host's own pager and colour settings left out; a terminal that does colour.
TERMINAL = {**{k: v for k, v in os.environ.items()
               if k not in ("PAGER", "GIT_PAGER", "LESS", "LV", "NO_COLOR")}, "TERM": "xterm"}


def on_a_terminal(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git-wal with stdout a terminal (a pty); what reached the terminal."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([GIT_WAL, *args], cwd=repo, stdout=slave,
                                stderr=subprocess.PIPE, env={**TERMINAL, **(env or {})})
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not data:
                break
            chunks.append(data)
        _, err = proc.communicate()
        assert proc.returncode == 0, err
        return b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(master)


def test_the_pager_is_gits_choice_and_only_on_a_terminal(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "paged")
    plain = ok(repo, "log", "--no-color")
    caught = {name: tmp_path / name for name in ("git-pager", "core-pager", "pager")}
    every = {"GIT_PAGER": f"cat > {caught['git-pager']}", "PAGER": f"cat > {caught['pager']}"}
    git(repo, "config", "core.pager", f"cat > {caught['core-pager']}")

    # Not a terminal: no pager, whatever is set.
    assert wal(repo, "log", "--no-color", env=every).stdout == plain
    assert not any(p.exists() for p in caught.values())

    # On a terminal: GIT_PAGER, then core.pager, then PAGER; the pager gets the text.
    assert on_a_terminal(repo, "log", "--no-color", env=every) == ""
    assert caught["git-pager"].read_text() == plain
    caught["git-pager"].unlink()
    assert on_a_terminal(repo, "log", "--no-color", env={**every, "GIT_PAGER": ""}) == plain
    assert not any(p.exists() for p in caught.values())  # "" means no pager
    assert on_a_terminal(repo, "log", "--no-color", env={"PAGER": every["PAGER"]}) == ""
    assert caught["core-pager"].read_text() == plain
    git(repo, "config", "--unset", "core.pager")
    assert on_a_terminal(repo, "log", "--no-color", env={"PAGER": every["PAGER"]}) == ""
    assert caught["pager"].read_text() == plain
    # The pager gets git's LESS=FRX unless the user set LESS.
    seen = tmp_path / "less-env"
    pager = f"echo \"$LESS\" >> {seen}; cat >/dev/null"
    assert on_a_terminal(repo, "log", env={"PAGER": pager}) == ""
    assert on_a_terminal(repo, "log", env={"PAGER": pager, "LESS": "S"}) == ""
    assert seen.read_text() == "FRX\nS\n"
    # --no-pager: straight to the terminal.
    caught["pager"].unlink()
    assert on_a_terminal(repo, "log", "--no-pager", "--no-color",
                         env={"PAGER": every["PAGER"]}) == plain
    assert not caught["pager"].exists()


def test_colour_only_on_a_terminal_and_never_with_no_color(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "colour")
    ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=b"a\n")
    green = "\x1b[32mcommitted \x1b[0m"
    assert "\x1b[" not in ok(repo, "log")  # a pipe: no colour
    assert green in wal(repo, "log", "--color=always").stdout
    assert green in on_a_terminal(repo, "log", "--no-pager")
    assert "\x1b[" not in on_a_terminal(repo, "log", "--no-pager", env={"NO_COLOR": "1"})
    assert "\x1b[" not in on_a_terminal(repo, "log", "--no-pager", "--no-color")
    assert green in on_a_terminal(repo, "log", "--no-pager", "--color=always",
                                  env={"NO_COLOR": "1"})  # the command line wins
    assert "\x1b[" in on_a_terminal(repo, "log", "--no-pager", env={"NO_COLOR": ""})
    shown = wal(repo, "show", "2", "--color=always").stdout
    assert "\x1b[32m+a\x1b[0m" in shown and "\x1b[36m@@ -0,0 +1 @@\x1b[0m" in shown


def test_all_includes_what_compact_archived_and_show_finds_it_there(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "compacted")
    ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=b"a\n")
    ok(repo, "checkpoint")
    ok(repo, "compact")
    ok(repo, "apply", "write-file", "b.txt", "--from", "-", input=b"b\n")

    def lsns(*args: str) -> list[int]:
        return [int(x.split()[0]) for x in ok(repo, "log", *args).splitlines()]

    assert lsns() == [4, 5]
    assert lsns("--all") == [1, 2, 4, 5]
    assert "????" not in ok(repo, "log", "--all")  # every line has its append's time
    shown = ok(repo, "show", "2", "--no-color").splitlines()
    assert shown[1] == "target: a.txt" and shown[-1] == "+a"
