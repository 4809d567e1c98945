"""Power loss under a real Claude Code session, on a FUSE file system that
forgets every byte nobody fsynced (tests/powerloss/amnesiafs.py).

The repository lives inside the mount (made durable by fsyncing every file
of it before the session, as tests/test_power_loss.py does: the set-up is not
under test), with gitwal's hooks installed by `git wal install claude` in its
first commit. The real `claude -p` (docs/e2e.md) runs a scripted model that
makes six tool calls (:func:`plan`): Write, Edit, a Bash call writing a file,
Edit, Write over the first file, and a Bash call writing a file and
overwriting an edited one. gitwal's hooks log them through the hook server:
file steps, and the Bash calls as `exec` steps.

Where the power goes (:data:`CASES`), ordered by the scripted model holding
its reply to the request that carries call K's result (so no later call
starts), by polling the log through the mount, and by amnesiafs's faults,
never by sleeping:

* `after-call-K`: the request after call K is held, and the log shows calls
  1..K-1 committed and call K logged (committed too when K is a Bash call,
  whose PostToolUse is synchronous; an Edit's or Write's is `async`);
* `after-ref-rename`, `before-lock-fsync`, `before-lock-fsync-2`: held after
  call 3 (committed), a named fault of tests/test_power_loss.py is armed and
  the model let go on: the power goes right after the log's ref is renamed
  into place for call 4's commit, or right before the fsync of the ref's lock
  file for call 4's intent (so the Edit must be refused: no effect without a
  durable intent) or for its commit (the Edit ran: recovery must find it
  applied);
* `none`: the baseline, the same session left to finish, the hook server
  stopped, then the power cut.

Claude Code's process group, the hook server's and any hook command left are
SIGKILLed, the file system unmounted. On the backing directory (plain disk):
`git fsck` and `git wal verify --all` pass; `git wal recover --json` (a step
left in doubt resolved as not applied, as a person would) leaves nothing open
and reports no drift; every record read in the log before the power went is
still there, unchanged; every call the model saw succeed has its intent in
the log and is committed; every path holds what the newest committed call
that wrote it wrote (the script's own account, not the log's), or, when no
committed call wrote it, what it held before (a path an uncommitted Bash call
wrote is left as found).

Claude Code 2.1.328 fsyncs what its Write and Edit tools write; nothing
fsyncs a Bash command's files but gitwal's snapshots. The six sessions take
about 45 to 60 s on the 2-core machine. Skipped without the pinned Claude
Code (a failure with GITWAL_E2E_REQUIRE=1) or without FUSE (a failure with
GITWAL_POWERLOSS_REQUIRE=1).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.powerloss.mount import Handle, mounted, require_fuse

from .agents import bash
from .claude import VENV_BIN, ClaudeCode, sealed_env, sigkill, stop_servers, wait_until
from .fake_api import Block, FakeApi, Request, Text, ToolUse

pytestmark = pytest.mark.slow

WAIT = 120.0  # seconds for anything the test waits on (a loaded 2-core machine)
GIT_WAL = str(VENV_BIN / "git-wal")
# Set in Claude Code's environment, so inherited by its hook commands, the hook
# server they start and their children: all of them can be found and killed by pid.
TAG = "E2E_POWER_LOSS_TAG"
PROMPT = "Do the six steps."
FILES = {"a.txt": "alpha\n", "b.txt": "beta\n", "keep.txt": "kept\n"}

# The named crash point of tests/test_power_loss.py: the log's ref renamed into
# place (the append is visible, nothing after it ran).
AFTER_REF_RENAME: dict[str, Any] = {"op": "rename", "from_rgx": r"refs/wal/.*\.lock$",
                                    "when": "after"}
# ... and the lock file of the log's ref about to be fsynced (the append is not
# visible yet). Narrowed to the log's ref: other lock files are fsynced meanwhile.
BEFORE_LOCK_FSYNC: dict[str, Any] = {"op": "fsync", "path_rgx": r"refs/wal/.*\.lock$",
                                     "when": "before"}


@dataclass(frozen=True)
class Step:
    """One scripted tool call, and the files it writes with what they hold after."""

    use: ToolUse
    effects: Mapping[str, str]

    @property
    def shell(self) -> bool:
        return self.use.name == "Bash"


def plan(repo: Path) -> list[Step]:
    def write(path: str, text: str) -> Step:
        return Step(ToolUse("Write", {"file_path": str(repo / path), "content": text}),
                    {path: text})

    def edit(path: str, old: str, new: str, after: str) -> Step:
        return Step(ToolUse("Edit", {"file_path": str(repo / path), "old_string": old,
                                     "new_string": new}), {path: after})

    return [
        write("new.txt", "new 1\n"),
        edit("a.txt", "alpha", "alpha 2", "alpha 2\n"),
        Step(bash("echo 3 > out3.txt", "Write out3.txt"), {"out3.txt": "3\n"}),
        edit("b.txt", "beta", "beta 4", "beta 4\n"),
        write("new.txt", "new 5\n"),
        Step(bash("echo 6 > out6.txt && echo 'alpha 6' > a.txt", "Write out6.txt and a.txt"),
             {"out6.txt": "6\n", "a.txt": "alpha 6\n"}),
    ]


def results_in(req: Request) -> int:
    return len({r.get("tool_use_id") for r in req.tool_results()})


@dataclass
class Player:
    """Plays ``steps`` in order (step n once the transcript holds n results);
    holds the request carrying ``hold_at`` results until ``release`` is set;
    says nothing more once ``stopped``."""

    steps: Sequence[ToolUse]
    hold_at: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    stopped: bool = False

    def __call__(self, req: Request) -> Sequence[Block]:
        n = results_in(req)
        if n == self.hold_at:
            self.release.wait(WAIT)
        if self.stopped:
            return [Text("Stopped.")]
        if n < len(self.steps):
            return [Text(f"Step {n + 1}."), self.steps[n]]
        return [Text("All steps done.")]


# -- the repository in the mount, and its log ---------------------------------------------

# A process of its own (a hung mount would block only it): the project and its
# hooks in the first commit, then every file and directory of it fsynced.
SETUP = r'''
import json, os, subprocess, sys
root, files, git_wal = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
os.makedirs(root)
for name, text in files.items():
    with open(os.path.join(root, name), "w") as f:
        f.write(text)
subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
subprocess.run([git_wal, "install", "claude", "--scope", "project"], cwd=root, check=True,
               capture_output=True)
with open(os.path.join(root, ".git", "info", "exclude"), "a") as f:
    f.write(".claude/settings.local.json\n")
for argv in (["add", "-A"], ["commit", "-q", "-m", "init"]):
    subprocess.run(["git", *argv], cwd=root, check=True)
for d, _dirs, names in os.walk(root):
    for name in [*names, "."]:
        fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
'''


def run(cwd: Path, argv: Sequence[str], env: Mapping[str, str]
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, env=dict(env), capture_output=True, text=True,
                          timeout=WAIT, stdin=subprocess.DEVNULL)


def make_repo(repo: Path, env: Mapping[str, str]) -> None:
    proc = run(repo.parent, [sys.executable, "-c", SETUP, str(repo), json.dumps(FILES), GIT_WAL],
               env)
    assert proc.returncode == 0, f"setting up {repo}: {proc.stderr}"


def log_records(repo: Path, run_id: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    proc = run(repo, [GIT_WAL, "log", "--run", run_id, "--json"], env)
    if proc.returncode != 0 and "UnknownRun" in proc.stdout:
        return []  # not begun yet
    assert proc.returncode == 0, f"git wal log: {proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines()]


def call_of(rec: Mapping[str, Any]) -> str | None:
    agent = rec.get("args", {}).get("agent")
    return str(agent["call"]) if isinstance(agent, dict) and "call" in agent else None


def closing(recs: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """intent LSN -> the commit and abort records that closed it."""
    out: dict[int, list[Mapping[str, Any]]] = {}
    for r in recs:
        if r["type"] in ("commit", "abort"):
            out.setdefault(r["intent"], []).append(r)
    return out


def outcomes(recs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """tool_use id -> "commit", "abort" or "open", for every call with an intent."""
    closed = closing(recs)
    return {c: (closed[r["lsn"]][0]["type"] if r["lsn"] in closed else "open")
            for r in recs if r["type"] == "intent" and (c := call_of(r)) is not None}


def committed_prefix(recs: Sequence[Mapping[str, Any]], ids: Sequence[str]) -> int:
    """How many of the calls ``ids``, from the first, are committed in ``recs``."""
    state = outcomes(recs)
    n = 0
    while n < len(ids) and state.get(ids[n]) == "commit":
        n += 1
    return n


# -- killing a session ---------------------------------------------------------------


def tagged(tag: str) -> list[int]:
    """Every live process whose environment carries ``TAG=tag``."""
    mark = f"{TAG}={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if mark in environ:
            pids.append(int(entry))
    return pids


def kill_session(proc: subprocess.Popen[bytes], runtime: Path, tag: str) -> None:
    """SIGKILL Claude Code's process group, the hook server's group (its pid is
    in its lock), then every process of the session left: hook commands, each
    in a process group of its own, outlive Claude Code's."""
    sigkill(proc)
    for lock in (runtime / "gitwal").glob("*.lock"):
        try:
            text = lock.read_text().strip()
        except FileNotFoundError:
            continue
        if text.isdigit() and int(text) in tagged(tag):
            try:
                os.killpg(int(text), signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + WAIT
    while pids := tagged(tag):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert time.monotonic() < deadline, f"processes of the session outlive SIGKILL: {pids}"
        time.sleep(0.05)  # polling for their exit (each got SIGKILL), not ordering events


# -- one session, one power loss ----------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """Where the power goes: the model's request after call ``hold_at`` is held;
    then the power is cut at once, or ``arm`` is armed and the model let go on.
    Neither: the session ends, then the power is cut."""

    hold_at: int | None = None
    arm: Mapping[str, Any] | None = None


@dataclass
class Session:
    repo: Path  # on the backing directory, once unmounted
    run_id: str
    steps: list[Step]
    emitted: list[ToolUse]
    succeeded: list[str]  # tool_use ids whose result reached the model without is_error
    before: list[dict[str, Any]]  # the log as read through the mount before the power went
    crash: str
    stats: dict[str, Any]
    seconds: float
    recovery: Counter[str] = field(default_factory=Counter)
    after: dict[str, str] = field(default_factory=dict)  # call -> its outcome, recovered
    on_disk: list[dict[str, Any]] = field(default_factory=list)  # the log before recovery

    def summary(self) -> str:
        crash = self.stats.get("crash") or {}
        lost = [p for p in crash.get("unsynced_paths", []) if not p.startswith("/repo/.git/")]
        ids = [u.id for u in self.emitted]
        calls = ", ".join(f"{i}:{self.after.get(c, 'no intent')}" for i, c in enumerate(ids, 1))
        return (f"crash {self.crash} after {self.seconds:.1f} s; {len(ids)} call(s), "
                f"{len(self.succeeded)} succeeded; {len(self.before)} record(s) read before; "
                f"unsynced at the crash: {crash.get('unsynced_files')} file(s), of the tree "
                f"{lost}; recovery {dict(self.recovery)}; calls {calls}")


def power_loss(tmp_path: Path, claude_bin: Path, runtime: Path, case: Case) -> Session:
    """Run the session in the mount and cut the power as ``case`` says."""
    require_fuse()
    env = sealed_env(tmp_path / "home")
    sid, tag = str(uuid.uuid4()), uuid.uuid4().hex
    run_id = f"claude-{sid}"  # gitwal's run of the session (agents/session.py run_id_for)
    t0 = time.monotonic()
    with mounted(tmp_path / "backing", tmp_path / "mnt") as fs:
        repo = fs.mount / "repo"
        make_repo(repo, env)
        steps = plan(repo)
        player = Player([s.use for s in steps], case.hold_at)
        with FakeApi(player, log_path=tmp_path / "requests.jsonl") as api:
            cc = ClaudeCode(claude_bin, tmp_path / "home", api.url, env={TAG: tag})
            proc = cc.start(repo, PROMPT, session_id=sid, log=tmp_path / "claude.log")
            try:
                before = cut_power(fs, proc, api, player, steps, repo, run_id, env, runtime,
                                   case)
            finally:
                kill_session(proc, runtime, tag)
                player.stopped = True
                player.release.set()  # a held reply goes nowhere now
            emitted = api.emitted
            requests = api.main_requests
            assert api.errors == [], api.errors
        crash = fs.wait_crashed()
    ok = {str(r.get("tool_use_id")) for req in requests for r in req.tool_results()
          if not r.get("is_error")}
    return Session(tmp_path / "backing" / "repo", run_id, steps, emitted,
                   [u.id for u in emitted if u.id in ok], before, crash.removeprefix("crashed "),
                   fs.stats(), time.monotonic() - t0)


def cut_power(fs: Handle, proc: subprocess.Popen[bytes], api: FakeApi, player: Player,
              steps: Sequence[Step], repo: Path, run_id: str, env: Mapping[str, str],
              runtime: Path, case: Case) -> list[dict[str, Any]]:
    """Wait for the case's moment, cut the power (or arm its fault and let the
    session go on); the log as read last before the power went."""
    if case.hold_at is None:
        assert proc.wait(timeout=WAIT) == 0, "claude failed: see claude.log"
        stop_servers(runtime)  # the documented way: the calls in hand are answered first
        recs = log_records(repo, run_id, env)
        fs.crash()
        return recs
    k = case.hold_at
    wait_until(lambda: any(results_in(r) == k for r in api.main_requests), WAIT,
               f"the model's request with the result of call {k}", proc)
    # From the held request itself: `api.emitted` waits for the script's lock,
    # which the held request keeps.
    held = next(r for r in api.main_requests if results_in(r) == k)
    ids = [str(u["id"]) for u in held.tool_uses()]
    assert len(ids) == k, ids
    recs = []

    def logged() -> bool:
        nonlocal recs
        recs = log_records(repo, run_id, env)
        done = committed_prefix(recs, ids)
        # A Bash call's PostToolUse is synchronous: Claude Code sent its result after it.
        return done == k or (done == k - 1 and not steps[k - 1].shell
                             and ids[-1] in outcomes(recs))

    wait_until(logged, WAIT, f"calls 1..{k - 1} committed and call {k} logged", proc,
               interval=0.02)
    if case.arm is None:
        fs.crash()
        return recs
    fs.arm(dict(case.arm))
    player.release.set()
    wait_until(lambda: fs.poll_crashed() is not None or proc.poll() is not None, WAIT,
               f"the fault {case.arm}, or the end of the session")
    fs.crash()  # a no-op when the fault fired (else the test fails on the crash reason)
    return recs


# -- the checks on the backing directory ----------------------------------------------------


def recover(s: Session, env: Mapping[str, str]) -> dict[str, Any]:
    """`git wal recover` until nothing is open; a step in doubt is resolved as
    not applied (which writes nothing), as a person would."""
    for _ in range(4):
        proc = run(s.repo, [GIT_WAL, "recover", "--run", s.run_id, "--json"], env)
        assert proc.returncode in (0, 3), f"git wal recover exit {proc.returncode}: {proc.stderr}"
        report: dict[str, Any] = json.loads(proc.stdout)
        for item in report["intents"]:
            s.recovery[f"{item['outcome']}/{item['action']}"] += 1
        if proc.returncode == 0:
            return report
        for item in report["intents"]:
            if item["open"]:
                assert item["outcome"] == "in-doubt", item
                res = run(s.repo, [GIT_WAL, "resolve", str(item["lsn"]), "--yes", "--run", s.run_id,
                                   "--not-applied", "--note", "power-loss test"], env)
                assert res.returncode == 0, res.stderr
                s.recovery["resolved-not-applied"] += 1
    raise AssertionError("git wal recover did not settle the run in 4 rounds")


def check(s: Session, env: Mapping[str, str]) -> list[str]:
    """Everything the power loss must leave true: the problems found."""
    problems: list[str] = []
    repo = s.repo

    def failed(what: str, proc: subprocess.CompletedProcess[str]) -> None:
        problems.append(f"{what} exit {proc.returncode}: "
                        f"{(proc.stdout + proc.stderr).strip()[-1500:]}")

    if (fsck := run(repo, ["git", "fsck", "--no-progress"], env)).returncode != 0:
        failed("git fsck", fsck)
    if (verify := run(repo, [GIT_WAL, "verify", "--all"], env)).returncode != 0:
        failed("git wal verify --all (before recovery)", verify)
    s.on_disk = log_records(repo, s.run_id, env)
    report = recover(s, env)
    if report["drift"]:
        problems.append(f"drift after recovery: {report['drift']}")
    if (verify := run(repo, [GIT_WAL, "verify", "--all"], env)).returncode != 0:
        failed("git wal verify --all (after recovery)", verify)

    recs = log_records(repo, s.run_id, env)
    s.after = outcomes(recs)
    by_lsn = {r["lsn"]: r for r in recs}
    for r in s.before:
        if by_lsn.get(r["lsn"]) != r:
            problems.append(f"LSN {r['lsn']} was in the log before the power loss; now it is "
                            f"{by_lsn.get(r['lsn'])}, was {r}")
    for lsn, rs in closing(recs).items():
        if len(rs) > 1:
            problems.append(f"LSN {lsn} closed {len(rs)} times: {rs}")
    if still := [c for c, o in s.after.items() if o == "open"]:
        problems.append(f"intents of calls {still} open after recovery")
    # No effect without a durable intent: a call that ran has its intent logged.
    for call in s.succeeded:
        if call not in s.after:
            problems.append(f"call {call} succeeded, but no intent of it is in the log")

    # The tree: each path as the newest committed call left it; a path no committed
    # call wrote as it was (unless an uncommitted shell call wrote it: left as found).
    want: dict[str, str | None] = dict(FILES)
    found_only: set[str] = set()
    for step, use in zip(s.steps, s.emitted, strict=False):
        for path, text in step.effects.items():
            want.setdefault(path, None)
            if s.after.get(use.id) == "commit":
                want[path] = text
                found_only.discard(path)
            elif step.shell:
                found_only.add(path)
    for path, expected in sorted(want.items()):
        have = (repo / path).read_bytes() if (repo / path).exists() else None
        if path not in found_only and have != (None if expected is None else expected.encode()):
            problems.append(f"{path} holds {have!r}; the committed calls left {expected!r}")
    return problems


# -- the tests -------------------------------------------------------------------------------


CASES = {
    "none": Case(),
    "after-call-2": Case(hold_at=2),
    "after-call-5": Case(hold_at=5),
    # armed once call 3 is committed, so counted from there on: intent, commit of call 4
    "after-ref-rename": Case(hold_at=3, arm={**AFTER_REF_RENAME, "nth": 2}),
    # ... the 1st: call 4's intent never becomes durable; the 2nd: its commit does not
    "before-lock-fsync": Case(hold_at=3, arm={**BEFORE_LOCK_FSYNC, "nth": 1}),
    "before-lock-fsync-2": Case(hold_at=3, arm={**BEFORE_LOCK_FSYNC, "nth": 2}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_claude_session_survives_a_power_loss(tmp_path: Path, claude_bin: Path,
                                              hook_servers: Path, name: str) -> None:
    case = CASES[name]
    s = power_loss(tmp_path, claude_bin, hook_servers, case)
    problems = check(s, sealed_env(tmp_path / "home"))
    print(s.summary())
    ids = [u.id for u in s.emitted]
    # The moment each case meant to cut the power at.
    if case.hold_at is None:
        assert s.crash.startswith("control") and committed_prefix(s.before, ids) == 6, (
            s.summary())
    elif case.arm is None:
        assert len(ids) == case.hold_at, s.summary()
    else:
        assert s.crash.startswith(f"fault0:{case.arm['when']}:{case.arm['op']}"), s.summary()
        newest = s.on_disk[-1]
        intents = {r["lsn"]: r for r in s.on_disk if r["type"] == "intent"}
        four = ids[3]
        if name == "after-ref-rename":  # the commit of call 4 just became visible
            assert newest["type"] == "commit" and call_of(intents[newest["intent"]]) == four, (
                s.summary(), newest)
        elif case.arm["nth"] == 1:  # call 4's intent is not durable: its Edit was refused
            assert newest["type"] == "commit" and call_of(intents[newest["intent"]]) == ids[2], (
                s.summary(), newest)
            assert four not in s.after and four not in s.succeeded, s.summary()
        else:  # call 4's Edit ran, its commit is not durable: recovery finds it applied
            assert newest["type"] == "intent" and call_of(newest) == four, (s.summary(), newest)
            assert s.recovery == {"applied-missing-commit/committed": 1}, s.summary()
    # Each call the model saw succeed is committed (by its hook, or by recovery that
    # found its effect): none of these cases cuts the power inside a closing hook.
    assert all(s.after.get(c) == "commit" for c in s.succeeded), s.summary()
    assert not problems, "\n".join([s.summary(), *problems])
