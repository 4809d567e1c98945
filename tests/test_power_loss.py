"""Power loss under real workloads, on a FUSE file system that forgets every
byte nobody fsynced (tests/powerloss/amnesiafs.py, after LazyFS).

Each case mounts amnesiafs, creates a git repository inside the mount (made
durable by fsyncing every file: the set-up is not under test), and runs a
workload as a real process: `git wal` commands, one line printed after each
one returned success. Then the power goes: at a random counted operation
(seeded; its range comes from a dry run), at a named fault (after the log's
ref was renamed into place, before a lock file's fsync, mid pack write,
before git's index rename, after a working-tree rename; each at its n-th
matching operation, n at random among those the dry run saw), or right after
the workload finished (the dry run itself). The workload's process group is
killed, the file system unmounted, and the backing directory (plain disk, no
FUSE) must hold:

* a repository `git fsck` accepts and logs `git wal verify --all` accepts;
* after `git wal recover` (and a person's decision for what it leaves in
  doubt: `git wal approve` + `--redo` for an irreversible step awaiting
  approval, `git wal resolve --not-applied` for a step in doubt), no open
  intent, and no drift;
* every step the workload printed as done, committed in the log, with the
  content it printed, and that content (or a later committed step's) in
  the tree; no step committed twice.

GITWAL_POWERLOSS_CASES (random crashes per workload, default 3) and
GITWAL_POWERLOSS_SEED make longer runs; GITWAL_POWERLOSS_REQUIRE=1 fails
instead of skipping where FUSE cannot run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitwal.base.ids import ABSENT
from gitwal.worktree.treeread import tree_state

from .conftest import GIT_WAL
from .powerloss.mount import Handle, mounted
from .test_agent_payloads import SESSION, claude_tool

pytestmark = pytest.mark.slow

# Read at import: the sealed environment of each test drops every GITWAL_* variable.
RANDOM_CASES = int(os.environ.get("GITWAL_POWERLOSS_CASES", "3"))
SEED = int(os.environ.get("GITWAL_POWERLOSS_SEED", "20261207"))
RUN = "powerloss"
WORKLOAD_TIMEOUT = 300.0  # a workload that neither finishes nor crashes by then hangs
CMD_TIMEOUT = 120.0
PROJECT = {"README": "hello\n", "src/a.txt": "alpha 0\n", "src/keep.txt": "kept\n"}

# Named crash points (docs: tests/powerloss/amnesiafs.py). Paths are mount-relative;
# each case sets "nth" (which matching operation) from the dry run's count.
NAMED: dict[str, dict[str, Any]] = {
    # the log's ref renamed into place: the append is visible, nothing after it ran
    "after-ref-rename": {"op": "rename", "from_rgx": r"refs/wal/.*\.lock$", "when": "after"},
    # a lock file about to be fsynced (refs/wal/<run>.lock, git's ref locks)
    "before-lock-fsync": {"op": "fsync", "path_rgx": r"\.lock$", "when": "before"},
    # a write into a pack (gitwal's appends: .pack-<id>.pack.<tag>.<hex>.walt, one
    # write a pack but for big images; git's: tmp_pack_*)
    "mid-pack-write": {"op": "write", "path_rgx": r"/objects/pack/[^/]*\.pack($|\.)|tmp_pack",
                       "nth": 3, "when": "before"},
    # git's index about to be renamed into place (a checkpoint's commit)
    "before-index-rename": {"op": "rename", "from_rgx": r"index\.lock$", "when": "before"},
    # a working-tree file renamed over its target from gitwal's temp file
    "after-tree-rename": {"op": "rename", "from_rgx": r"^/repo/(?!\.git/).*\.walt$",
                          "when": "after"},
}

# Which named faults each workload must reach in its dry run (a regular
# expression that no longer matches would make its cases vacuous).
REACHES: dict[str, set[str]] = {
    "files": {"after-ref-rename", "before-lock-fsync", "mid-pack-write", "after-tree-rename"},
    "shell": {"after-ref-rename", "before-lock-fsync", "mid-pack-write"},
    "mix": set(NAMED),
    "undo": {"after-ref-rename", "before-lock-fsync", "mid-pack-write", "after-tree-rename"},
    "irreversible": set(NAMED),
}

WORKLOAD = r'''
"""A power-loss workload: `git wal` steps, one line printed after each succeeded.

committed <lsn> <tool> <path> <blob id or absent>   the step left this at path
checkpoint <lsn> <commit>                           a checkpoint record and its commit
awaiting <lsn> / approved <lsn>                     an irreversible step's approval
"""
import base64, hashlib, json, random, subprocess, sys

GIT_WAL, KIND, RUN = sys.argv[1], sys.argv[2], "powerloss"
ABSENT = "absent"
done = []     # (lsn, path, before, after) of file and shell steps in effect, oldest first
undone = []   # the steps undone and not redone, newest last
tree = {"README": b"hello\n", "src/a.txt": b"alpha 0\n", "src/keep.txt": b"kept\n"}


def oid(data):
    if data is None:
        return ABSENT
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def wal(*args, stdin=None, codes=(0,)):
    p = subprocess.run([GIT_WAL, *args], input=stdin, capture_output=True, timeout=600)
    if p.returncode not in codes:
        sys.stderr.write(f"git wal {' '.join(args)}: exit {p.returncode}\n"
                         f"{p.stderr.decode(errors='replace')}\n")
        sys.exit(1)
    return p


def say(*words):
    print(*words, flush=True)


def begin():
    wal("begin", "--run", RUN, "--task", f"power loss: {KIND}")
    say("run", RUN)


def effect(lsn, tool, path, after):
    done.append((lsn, path, tree.get(path), after))
    undone.clear()
    tree[path] = after
    say("committed", lsn, tool, path, oid(after))


def write(path, data):
    out = json.loads(wal("apply", "--run", RUN, "--json", "write-file", path, "--from", "-",
                         stdin=data).stdout)
    effect(out["lsn"], "write_file", path, data)


def shell(n, *flags):
    path = f"out{n}.txt"
    out = json.loads(wal("exec", "--run", RUN, "--json", *flags, "--", "sh", "-c",
                         f"echo {n} > {path}").stdout)
    effect(out["lsn"], "exec", path, f"{n}\n".encode())


def checkpoint():
    out = json.loads(wal("checkpoint", "--run", RUN, "--json").stdout)
    say("checkpoint", out["lsn"], out["git"])


def undo():
    out = json.loads(wal("undo", "--run", RUN, "--json").stdout)
    lsn, path, before, after = step = done.pop()
    undone.append(step)
    assert [c["path"] for c in out["changes"]] == [path], out
    assert out["changes"][0]["to"] == oid(before), (out, oid(before))
    tree[path] = before
    say("committed", out["lsn"], "undo", path, oid(before))


def redo():
    out = json.loads(wal("redo", "--run", RUN, "--json").stdout)
    lsn, path, before, after = step = undone.pop()
    done.append(step)
    assert [c["path"] for c in out["changes"]] == [path], out
    assert out["changes"][0]["to"] == oid(after), (out, oid(after))
    tree[path] = after
    say("committed", out["lsn"], "redo", path, oid(after))


def irreversible():
    argv = ["exec", "--run", RUN, "--json", "--irreversible", "--",
            "sh", "-c", "echo shipped >> shipped.log"]
    wal(*argv, codes=(3,))  # logged; waits for a person
    lsn = json.loads(wal("status", "--run", RUN, "--json").stdout)["open"][0]
    say("awaiting", lsn)
    wal("approve", "--yes", "--run", RUN, "--note", "power-loss test", str(lsn))
    say("approved", lsn)
    out = json.loads(wal(*argv).stdout)
    assert out["lsn"] == lsn, (out, lsn)
    tree["shipped.log"] = b"shipped\n"
    say("committed", lsn, "exec", "shipped.log", oid(b"shipped\n"))


def big(seed, size):
    return base64.encodebytes(random.Random(seed).randbytes(size))


begin()
if KIND == "files":
    write("src/a.txt", b"alpha 1\n")
    write("data/big.txt", big(1, 450_000))  # a pack of several writes
    write("src/b.txt", b"beta 1\n" * 300)
    write("src/a.txt", b"alpha 2\n" * 50)
    write("data/big.txt", big(2, 200_000))
    write("src/a.txt", b"alpha 3\n")
elif KIND == "shell":
    for n in range(1, 6):
        shell(n)
elif KIND == "mix":
    write("src/a.txt", b"alpha 1\n")
    shell(1)
    checkpoint()
    write("data/big.txt", big(3, 300_000))
    shell(2)
    checkpoint()
    write("src/a.txt", b"alpha 2\n")
elif KIND == "undo":
    write("src/a.txt", b"alpha 1\n")
    write("src/a.txt", b"alpha 2\n")
    write("src/b.txt", b"beta 1\n")
    undo()   # src/b.txt goes
    undo()   # src/a.txt back to alpha 1
    redo()   # src/a.txt alpha 2 again
    shell(1)
    undo()   # out1.txt goes
    redo()   # out1.txt back
elif KIND == "irreversible":
    write("src/a.txt", b"alpha 1\n")
    shell(1)
    checkpoint()
    irreversible()
    write("src/a.txt", b"alpha 2\n")
else:
    raise SystemExit(f"unknown workload {KIND}")
say("done")
'''

# The control: plain appends, never fsynced; each record printed once written.
CONTROL = r'''
import json, os, sys
sync = sys.argv[1] == "fsync"
fd = os.open("journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for n in range(int(sys.argv[2])):
    os.write(fd, (json.dumps({"n": n, "pad": "x" * 100}) + "\n").encode())
    if sync:
        os.fsync(fd)
    print(n, flush=True)
os.close(fd)
'''


# What amnesiafs keeps: run in the mount, each expectation checked before the
# crash (through FUSE) by the script and after it (on the backing directory)
# by the test.
SEMANTICS = r'''
import os

def put(name, data, flags=os.O_TRUNC, sync=False):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    os.write(fd, data)
    if sync:
        os.fsync(fd)
    return fd

os.close(put("synced", b"one", sync=True))
os.close(put("synced", b"two"))                      # overwritten, never synced
assert open("synced", "rb").read() == b"two" and os.stat("synced").st_size == 3
fd = put("moved.tmp", b"bee")                        # renamed, then synced under its new name
os.rename("moved.tmp", "moved")
os.fsync(fd)
os.close(fd)
os.close(put("linked", b"dee"))                      # synced through another hard link
os.link("linked", "link2")
fd = os.open("link2", os.O_RDONLY)
os.fsync(fd)
os.close(fd)
fd = put("appended", b"x", os.O_APPEND)
os.write(fd, b"y")
os.fsync(fd)
os.write(fd, b"z")                                   # after the fsync: lost
os.close(fd)
assert open("appended", "rb").read() == b"xyz"
os.close(put("shrunk", b"hello", sync=True))
os.truncate("shrunk", 2)
assert os.stat("shrunk").st_size == 2
fd = put("shrunk2", b"hello", sync=True)
os.ftruncate(fd, 2)
os.fsync(fd)
os.close(fd)
fd = put("gone", b"data")                            # unlinked while open, then closed
os.unlink("gone")
os.close(fd)
os.close(put("reused", b"fresh"))                    # may get the freed inode: nothing stale
assert open("reused", "rb").read() == b"fresh"
os.mkdir("dir")
fd = os.open("dir", os.O_RDONLY | os.O_DIRECTORY)
os.fsync(fd)
os.close(fd)
print("ok", flush=True)
'''

SEMANTICS_AFTER = {"synced": b"one", "moved": b"bee", "linked": b"dee", "link2": b"dee",
                   "appended": b"xy", "shrunk": b"hello", "shrunk2": b"he", "reused": b""}


# -- the harness ------------------------------------------------------------------------


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# The set-up, as a process of its own (a hung mount would block only it): the
# repository, then every file and directory of it fsynced (not under test).
SETUP = r'''
import json, os, subprocess, sys
root, files = sys.argv[1], json.loads(sys.argv[2])
for name, text in files.items():
    os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
    with open(os.path.join(root, name), "w") as f:
        f.write(text)
for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
    subprocess.run(["git", *argv], cwd=root, check=True)
for d, _dirs, names in os.walk(root):
    for name in [*names, "."]:
        fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
'''


def run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True,
                          timeout=CMD_TIMEOUT)


def make_repo(path: Path) -> None:
    """The repository the workload runs in (``path`` is in the mount)."""
    proc = run(path.parent, sys.executable, "-c", SETUP, str(path), json.dumps(PROJECT))
    assert proc.returncode == 0, f"setting up {path}: {proc.stderr}"


def gitwal(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(cwd, GIT_WAL, *args)


@dataclass
class Driven:
    lines: list[list[str]]
    finished: bool  # the workload ended (its stdout closed) before the crash
    returncode: int | None
    ops_at_end: int | None  # counted operations when it ended, if it ended first
    stderr: str


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=CMD_TIMEOUT)


def drive(fs: Handle, script: Path, repo: Path, args: list[str], log: Path) -> Driven:
    """Run the workload until the power goes or it ends (then cut the power),
    kill its process group, and return what it printed."""
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, str(script), *args], cwd=repo,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    data = b""
    finished = False
    ops_at_end = None
    deadline = time.monotonic() + WORKLOAD_TIMEOUT
    try:
        while fs.poll_crashed() is None:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([out, fs.notify], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"the workload {args} neither ended nor crashed "
                                     f"in {WORKLOAD_TIMEOUT} s")
            if out in ready:
                chunk = os.read(out, 65536)
                if not chunk:
                    finished = True
                    break
                data += chunk
        if finished:
            proc.wait(timeout=CMD_TIMEOUT)  # its stdout closed: it is exiting
            if fs.poll_crashed() is None:
                ops_at_end = fs.ops()
                fs.crash()
        fs.wait_crashed()
    finally:
        kill_group(proc)
        while True:  # what it printed before it died (every writer is dead: EOF comes)
            ready, _, _ = select.select([out], [], [], CMD_TIMEOUT)
            assert ready, "the workload's stdout stayed open after its group was killed"
            chunk = os.read(out, 65536)
            if not chunk:
                break
            data += chunk
        proc.stdout.close()
    lines = [line.split() for line in data.decode().splitlines()]
    return Driven(lines, finished, proc.returncode, ops_at_end,
                  log.read_text(errors="replace"))


@dataclass
class Result:
    name: str
    crash: str
    problems: list[str] = field(default_factory=list)
    printed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    stats: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        crash = self.stats.get("crash") or {}
        return (f"{self.name}: {self.crash}; {self.printed} step(s) printed; "
                f"lost at crash: {crash.get('unsynced_files', '?')} file(s), "
                f"{crash.get('unsynced_bytes', '?')} byte(s); recovery: {dict(self.outcomes)}"
                + "".join(f"\n    - {p}" for p in self.problems))


def run_case(base: Path, workload: str, script: Path, faults: list[dict[str, Any]],
             name: str) -> tuple[Result, Driven, int]:
    """One mount, one workload, one power loss (at the first of ``faults`` to
    fire, else once the workload ended); then the checks on the backing
    directory. Returns the result, what the workload did, and the operation
    count after set-up (the faults are armed then)."""
    backing, mount = base / "backing", base / "mnt"
    with mounted(backing, mount) as fs:
        make_repo(mount / "repo")
        ops0 = fs.ops()
        for fault in faults:
            fs.arm(fault)
        driven = drive(fs, script, mount / "repo", [GIT_WAL, workload], base / "workload.err")
        crash = fs.wait_crashed()
    result = Result(name, crash.removeprefix("crashed "))
    result.stats = fs.stats()
    check(backing / "repo", driven, result)
    return result, driven, ops0


# -- the checks on the backing directory ---------------------------------------------------


def check(repo: Path, driven: Driven, result: Result) -> None:
    """Everything a power loss must leave true, each failure recorded."""
    problems = result.problems
    printed = [line for line in driven.lines if line and line[0] != "run"]
    result.printed = sum(1 for line in printed if line[0] == "committed")

    fsck = run(repo, "git", "fsck", "--no-progress")
    if fsck.returncode != 0:  # recorded; the log's checks go on (they read objects only)
        problems.append(f"git fsck failed: {(fsck.stdout + fsck.stderr).strip()[-1500:]}")
    if run(repo, "git", "rev-parse", "--verify", "-q", f"refs/wal/{RUN}").returncode != 0:
        if driven.lines:
            problems.append(f"the run is gone although `git wal begin` returned: "
                            f"{driven.lines[0]}")
        return  # the power went before the run's plan was durable: nothing to recover
    verify = gitwal(repo, "verify", "--all")
    if verify.returncode != 0:
        problems.append(f"git wal verify --all (before recovery) exit {verify.returncode}: "
                        f"{(verify.stdout + verify.stderr).strip()[-1500:]}")

    report = recover_all(repo, result)
    if report is None:
        return
    if report["drift"]:
        problems.append(f"drift after recovery: {report['drift']}")
    verify = gitwal(repo, "verify", "--all")
    if verify.returncode != 0:
        problems.append(f"git wal verify --all (after recovery) exit {verify.returncode}: "
                        f"{(verify.stdout + verify.stderr).strip()[-1500:]}")
    after = run(repo, "git", "fsck", "--no-progress")
    if after.returncode != 0 and fsck.returncode == 0:
        problems.append(f"git fsck fails after recovery: "
                        f"{(after.stdout + after.stderr).strip()[-800:]}")
    check_log(repo, printed, problems)


def recover_all(repo: Path, result: Result) -> dict[str, Any] | None:
    """`git wal recover` until nothing is open; what it leaves to a person is
    decided as a person would (approve and redo a waiting irreversible step,
    resolve a step in doubt as not applied, which writes nothing)."""
    redo = False
    for _ in range(4):
        proc = gitwal(repo, "recover", "--run", RUN, "--json", *(["--redo"] if redo else []))
        if proc.returncode not in (0, 3):
            result.problems.append(f"git wal recover exit {proc.returncode}: "
                                   f"{proc.stderr.strip()[-1500:]}")
            return None
        report: dict[str, Any] = json.loads(proc.stdout)
        for item in report["intents"]:
            result.outcomes[f"{item['outcome']}/{item['action']}"] += 1
        if proc.returncode == 0:
            return report
        redo = False
        for item in report["intents"]:
            if not item["open"]:
                continue
            lsn = str(item["lsn"])
            if item["outcome"] == "awaiting-approval":
                if not any(r.get("type") == "approval" and r.get("intent") == item["lsn"]
                           for r in log_records(repo)):
                    approve = gitwal(repo, "approve", "--yes", "--run", RUN, "--note",
                                     "power loss", lsn)
                    if approve.returncode != 0:
                        result.problems.append(f"approve {lsn}: {approve.stderr.strip()}")
                        return None
                redo = True
            elif item["outcome"] == "in-doubt":
                resolve = gitwal(repo, "resolve", lsn, "--yes", "--run", RUN, "--not-applied",
                                 "--note", "power-loss test: left as found")
                if resolve.returncode != 0:
                    result.problems.append(f"resolve {lsn}: {resolve.stderr.strip()}")
                    return None
                result.outcomes["resolved-not-applied"] += 1
            else:
                result.problems.append(f"recover left LSN {lsn} open: {item}")
                return None
    result.problems.append("git wal recover did not settle the run in 4 rounds")
    return None


def log_records(repo: Path) -> list[dict[str, Any]]:
    proc = gitwal(repo, "log", "--run", RUN, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def disk_state(repo: Path, path: str) -> str:
    p = repo / path
    if not p.exists():
        return ABSENT
    return blob_id(p.read_bytes())


def check_log(repo: Path, printed: list[list[str]], problems: list[str]) -> None:
    records = log_records(repo)
    git = pygit2.Repository(str(repo))
    intents = {r["lsn"]: r for r in records if r["type"] == "intent"}
    closing: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r["type"] in ("commit", "abort"):
            closing.setdefault(r["intent"], []).append(r)
    for lsn, closed in closing.items():
        if len(closed) > 1:
            problems.append(f"LSN {lsn} closed {len(closed)} times: {closed}")
    commits = {lsn: c[0] for lsn, c in closing.items() if c[0]["type"] == "commit"}
    still_open = sorted(set(intents) - set(closing))
    if still_open:
        problems.append(f"open intents after recovery: {still_open}")

    def left(lsn: int, path: str) -> str | None:
        """What committed step ``lsn`` left at ``path`` (None: it did not touch it)."""
        intent, commit = intents[lsn], commits[lsn]
        if intent["tool"] == "exec":
            before = tree_state(git, intent["pre"][0], path)
            after = tree_state(git, commit["post"][0], path)
            return after if after != before else None
        if path in intent["target"]:
            state: str = commit["post"][intent["target"].index(path)]
            return state
        return None

    # Nothing committed twice: one commit per logical step (tool and arguments).
    seen: dict[str, int] = {}
    for lsn in sorted(commits):
        key = json.dumps([intents[lsn]["tool"], intents[lsn]["args"]], sort_keys=True)
        if key in seen:
            problems.append(f"LSN {lsn} repeats the committed step LSN {seen[key]}: {key}")
        seen[key] = lsn

    paths: dict[str, tuple[int, str]] = {}
    for line in printed:
        kind = line[0]
        if kind == "committed":
            lsn, tool, path, want = int(line[1]), line[2], line[3], line[4]
            if lsn not in commits:
                problems.append(f"printed as committed, not committed in the log: {line}")
                continue
            if intents[lsn]["tool"] != tool:
                problems.append(f"LSN {lsn} is a {intents[lsn]['tool']} step, printed {line}")
                continue
            logged = left(lsn, path)
            if logged != want:
                problems.append(f"the log says LSN {lsn} left {logged} at {path}, "
                                f"printed {want}")
            paths[path] = (lsn, want)
        elif kind == "checkpoint":
            lsn, commit_id = int(line[1]), line[2]
            if not any(r["type"] == "checkpoint" and r["lsn"] == lsn and r["git"] == commit_id
                       for r in records):
                problems.append(f"checkpoint LSN {lsn} ({commit_id}) is not in the log")
            ancestor = run(repo, "git", "merge-base", "--is-ancestor", commit_id, "HEAD")
            if ancestor.returncode != 0:
                problems.append(f"checkpoint commit {commit_id} is not in HEAD's history: "
                                f"{ancestor.stderr.strip()}")
        elif kind == "approved":
            lsn = int(line[1])
            if not any(r["type"] == "approval" and r["intent"] == lsn for r in records):
                problems.append(f"the approval of LSN {lsn} is not in the log")
        elif kind not in ("awaiting", "done"):
            problems.append(f"unexpected workload line {line}")

    # Each printed path holds what the newest committed step that touched it left.
    for path, (lsn, want) in sorted(paths.items()):
        newest, expected = lsn, want
        for later in sorted(c for c in commits if c > lsn):
            state = left(later, path)
            if state is not None:
                newest, expected = later, state
        found = disk_state(repo, path)
        if found != expected:
            size = (repo / path).stat().st_size if (repo / path).exists() else None
            problems.append(f"{path}: holds {found} ({size} bytes), but committed LSN {newest} "
                            f"left {expected}" + (f" (printed by LSN {lsn})" if newest != lsn
                                                   else ""))


# -- the tests ---------------------------------------------------------------------------


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "workload.py"
    path.write_text(WORKLOAD)
    return path


@pytest.mark.parametrize("workload", sorted(REACHES))
def test_power_loss(workload: str, script: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    rng = random.Random(f"{SEED}:{workload}")
    # The dry run: the named faults armed to count their matching operations
    # only (they never fire), the power cut once the workload ended.
    observe = [{**fault, "nth": 10**9} for fault in NAMED.values()]
    first, driven, ops0 = run_case(tmp_path / "end", workload, script, observe, "after the end")
    assert driven.finished and driven.returncode == 0 and driven.lines[-1] == ["done"], (
        f"the workload failed on a healthy file system: {driven.stderr}")
    assert driven.ops_at_end is not None
    span = driven.ops_at_end - ops0
    seen = {name: f["seen"] for name, f in zip(NAMED, first.stats["faults"], strict=True)}
    missing = sorted(name for name in REACHES[workload] if not seen[name])
    assert not missing, f"named faults the {workload} workload never reaches: {missing}"
    results = [first]

    cases: list[tuple[str, dict[str, Any]]] = []
    for at in sorted(rng.sample(range(1, span + 1), min(RANDOM_CASES, span))):
        cases.append((f"random op {at}/{span}", {"at_op": ops0 + at}))
    for name, fault in NAMED.items():
        if seen[name]:  # the n-th matching operation, n at random
            nth = rng.randint(1, seen[name])
            cases.append((f"{name} {nth}/{seen[name]}", {**fault, "nth": nth}))
    for i, (name, fault) in enumerate(cases):
        result, _, _ = run_case(tmp_path / f"case{i}", workload, script, [fault], name)
        results.append(result)
        if result.crash.startswith("control"):  # this run's operations differ from the dry run's
            result.crash += " (the fault did not fire: the power went after the end)"
    report = "\n".join(r.summary() for r in results)
    print(f"\n{workload}: {len(results)} power losses in {time.monotonic() - t0:.0f} s "
          f"(seed {SEED})\n{report}")
    failed = [r for r in results if r.problems]
    assert not failed, (f"{len(failed)} of {len(results)} power losses broke the "
                        f"{workload} workload (seed {SEED}):\n{report}")


def test_amnesiafs_keeps_exactly_what_was_fsynced(tmp_path: Path) -> None:
    script = tmp_path / "semantics.py"
    script.write_text(SEMANTICS)
    with mounted(tmp_path / "backing", tmp_path / "mnt") as fs:
        driven = drive(fs, script, fs.mount, [], tmp_path / "semantics.err")
    assert driven.finished and driven.returncode == 0 and driven.lines == [["ok"]], driven.stderr
    backing = tmp_path / "backing"
    found = {p.name: p.read_bytes() for p in backing.iterdir() if p.is_file()}
    assert found == SEMANTICS_AFTER
    assert (backing / "dir").is_dir() and not (backing / "moved.tmp").exists()
    stats = fs.stats()
    assert stats["fsyncdirs"] == 1 and stats["fsyncs"] == 7 and stats["written_back"] == 7
    # lost: synced's "two", appended's "z" (the whole "xyz"), shrunk's cut, reused's "fresh"
    assert stats["unsynced_files_at_crash"] == 4
    assert stats["unsynced_bytes_at_crash"] == len(b"two" + b"xyz" + b"he" + b"fresh")


@pytest.mark.parametrize("when", ["before", "after"])
def test_amnesiafs_named_fault_fires_before_or_after(when: str, tmp_path: Path) -> None:
    script = tmp_path / "renames.py"
    script.write_text("import os\nfor n in range(3):\n"
                      "    open(f'f{n}.tmp', 'w').close()\n"
                      "    os.rename(f'f{n}.tmp', f'f{n}')\n    print(n, flush=True)\n")
    fault = {"op": "rename", "from_rgx": r"^/f\d\.tmp$", "to_rgx": "1$", "when": when}
    with mounted(tmp_path / "backing", tmp_path / "mnt", faults=[fault]) as fs:
        driven = drive(fs, script, fs.mount, [], tmp_path / "renames.err")
        assert fs.crashed == f"crashed fault0:{when}:rename op=4"  # create, rename, create, rename
    # "after": the rename happened, and its success may reach the script and
    # be printed before the kill; "before": it failed (EIO), nothing after it
    allowed = [[["0"]], [["0"], ["1"]]] if when == "after" else [[["0"]]]
    assert not driven.finished and driven.lines in allowed, driven
    names = sorted(p.name for p in (tmp_path / "backing").iterdir())
    assert names == (["f0", "f1.tmp"] if when == "before" else ["f0", "f1"])
    assert fs.stats()["faults"] == [{"spec": fault, "fired": True, "seen": 1}]


@pytest.mark.parametrize("sync", [False, True])
def test_the_harness_loses_unsynced_writes(sync: bool, tmp_path: Path) -> None:
    """The control: plain appends that nobody fsynced are lost, fsynced ones
    are not. Proves the harness can fail the tests above."""
    script = tmp_path / "control.py"
    script.write_text(CONTROL)
    records = 40
    with mounted(tmp_path / "backing", tmp_path / "mnt") as fs:
        driven = drive(fs, script, fs.mount, ["fsync" if sync else "nosync", str(records)],
                       tmp_path / "control.err")
    assert driven.finished and driven.returncode == 0, driven.stderr
    printed = [int(line[0]) for line in driven.lines]
    assert printed == list(range(records))
    journal = tmp_path / "backing" / "journal.jsonl"
    assert journal.exists(), "a creation is metadata: it reaches the backing directory at once"
    survived = [json.loads(line)["n"] for line in journal.read_text().splitlines()]
    stats = fs.stats()
    written = sum(len(json.dumps({"n": n, "pad": "x" * 100})) + 1 for n in printed)
    if sync:
        assert survived == printed
        assert stats["fsyncs"] == records and stats["unsynced_files_at_crash"] == 0
    else:
        assert survived == [], f"unsynced records survived the power loss: {survived}"
        assert journal.stat().st_size == 0
        assert stats["unsynced_files_at_crash"] == 1
        assert stats["unsynced_bytes_at_crash"] == written


def test_an_agents_unsynced_write_is_durable_before_its_commit(tmp_path: Path) -> None:
    """An agent's Write and Edit need not fsync what they wrote (Claude Code
    does; others may not): the hook that closes the call makes the targets
    durable by name before the commit record says they hold the post-image."""
    with mounted(tmp_path / "backing", tmp_path / "mnt") as fs:
        repo = fs.mount / "repo"
        make_repo(repo)

        def hook(payload: dict[str, Any]) -> None:
            proc = subprocess.run([GIT_WAL, "hook", "claude"], cwd=repo, capture_output=True,
                                  input=json.dumps(payload).encode(), timeout=CMD_TIMEOUT)
            assert proc.returncode == 0, proc.stderr.decode()

        write = {"file_path": str(repo / "new.txt"), "content": "new 1\n"}
        edit = {"file_path": str(repo / "src/a.txt"), "old_string": "alpha 0",
                "new_string": "alpha 1"}
        hook(claude_tool(repo, "PreToolUse", "Write", write, "toolu_1"))
        (repo / "new.txt").write_text("new 1\n")  # written as an agent might: no fsync
        hook(claude_tool(repo, "PostToolUse", "Write", write, "toolu_1"))
        hook(claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_2"))
        (repo / "src/a.txt").write_text("alpha 1\n")
        hook(claude_tool(repo, "PostToolUse", "Edit", edit, "toolu_2"))
        fs.crash()
        fs.wait_crashed()
    backing = tmp_path / "backing" / "repo"
    records = [json.loads(line) for line in gitwal(
        backing, "log", "--json", "--run", f"claude-{SESSION}").stdout.splitlines()]
    assert [r["type"] for r in records if r["type"] in ("intent", "commit")] == [
        "intent", "commit", "intent", "commit"], records
    assert (backing / "new.txt").read_bytes() == b"new 1\n"
    assert (backing / "src/a.txt").read_bytes() == b"alpha 1\n"
