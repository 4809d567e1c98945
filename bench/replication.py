"""§11 of the report: a run's durable home on its remote (docs/remote-runs.md).

1. What replicating each append costs a step: ``Run.apply`` in a loop, in
   process, on two clones of one repository, one without a remote and one
   with ``wal.remote`` set to a bare repository served by a real smart-HTTP
   server (lighttpd + git http-backend, tests/gitservers.py), steps
   interleaved one for one; the pushes the server received, and how long the
   remote took to catch up after the last step.
2. The same with ``wal.remote.durability commit``, beside its floor: a plain
   `git push` (whole process) of one small commit to the same server.

    python -m bench.replication [--steps N]   (this section alone)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gitwal.run import Run
from gitwal.wal import Wal
from tests.gitservers import HttpGitServer

from .common import QUICK, fmt_ratio, fmt_time, met, seal_environment
from .section import Section, say

STEPS = 40 if QUICK else 200  # per durability and clone
FLOOR_PUSHES = 10 if QUICK else 40
TARGET_ASYNC = 1.1  # a step with wal.remote (async) against one without


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _clone(base: Path, name: str, url: str | None, durability: str) -> Run:
    path = base / name
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "f.txt").write_text("0\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "init")
    if url is not None:
        _git(path, "remote", "add", "origin", url)
        _git(path, "config", "wal.remote", "origin")
        _git(path, "config", "wal.remote.durability", durability)
    wal = Wal(path)
    run = wal.begin(task=name)
    return wal.run(run.id)


def _pushes(server: HttpGitServer) -> int:
    try:
        lines = server.access_log.read_text().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if "POST" in line and "git-receive-pack" in line)


@dataclass(frozen=True)
class Compared:
    durability: str
    steps: int
    plain: float  # median step, seconds
    remote: float
    total_plain: float
    total_remote: float
    pushes: int
    appends: int
    caught_up: float  # seconds after the last step until the remote had every append
    behind: int

    @property
    def ratio(self) -> float:
        return self.remote / self.plain


def compare(base: Path, server: HttpGitServer, steps: int, durability: str) -> Compared:
    bare_name = f"{durability}.git"
    server.add_bare(bare_name)
    plain = _clone(base, f"plain-{durability}", None, durability)
    remote = _clone(base, f"remote-{durability}", server.url(bare_name), durability)
    before = _pushes(server)
    times: dict[str, list[float]] = {"plain": [], "remote": []}
    for i in range(steps):
        order = [("plain", plain), ("remote", remote)]
        for name, run in order if i % 2 == 0 else order[::-1]:
            content = f"{name} {i}\n".encode()
            start = time.perf_counter()
            run.apply("write_file", path="f.txt", content=content)
            times[name].append(time.perf_counter() - start)
    done = time.monotonic()
    wal = Wal(base / f"remote-{durability}")
    while True:
        state = wal.status().remote
        assert state is not None
        if state.behind == 0 or time.monotonic() - done > 120:
            break
        time.sleep(0.05)  # a benchmark's wait for the remote, not a test's ordering
    return Compared(durability, steps, statistics.median(times["plain"]),
                    statistics.median(times["remote"]), sum(times["plain"]),
                    sum(times["remote"]), _pushes(server) - before, 2 * steps + 1,
                    time.monotonic() - done, state.behind)


def push_floor(base: Path, server: HttpGitServer, n: int) -> float:
    """Median of ``n`` whole-process `git push`es of one small commit."""
    server.add_bare("floor.git")
    path = base / "floor"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "remote", "add", "origin", server.url("floor.git"))
    times = []
    for i in range(n):
        (path / "f.txt").write_text(f"{i}\n")
        _git(path, "add", "f.txt")
        _git(path, "commit", "-q", "-m", str(i))
        start = time.perf_counter()
        _git(path, "push", "-q", "origin", "main")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _stop_pushers(base: Path) -> None:
    """The pushers linger; end them before their repositories go."""
    for lock in base.glob("remote-*/.git/wal/replica/*/pusher.lock"):
        text = lock.read_text().strip()
        if text:
            try:
                os.kill(int(text), 15)
            except ProcessLookupError:
                pass


def bench_replication(work: Path, steps: int = STEPS) -> Section:
    base = work / "replication"
    base.mkdir()
    say(f"§11 replication: {steps} steps per clone, async then commit durability")
    with HttpGitServer(base / "server") as server:
        try:
            results = [compare(base, server, steps, d) for d in ("async", "commit")]
            floor = push_floor(base, server, FLOOR_PUSHES)
        finally:
            _stop_pushers(base)
    section = Section(
        "11. A run's home on its remote (`wal.remote`)",
        "`Run.apply(\"write_file\", ...)` in process on two clones, steps interleaved "
        "one for one, one clone replicating to a bare repository behind lighttpd + git "
        "http-backend on this machine (`python -m bench.replication` runs this section "
        f"alone); the floor is the median of {FLOOR_PUSHES} whole-process `git push`es "
        "of one small commit to the same server.",
        ["durability", "median step, no remote", "median step, `wal.remote`", "ratio",
         "pushes / appends", "remote caught up after the last step"])
    for r in results:
        section.rows.append([r.durability, fmt_time(r.plain), fmt_time(r.remote),
                             fmt_ratio(r.ratio), f"{r.pushes} / {r.appends}",
                             f"{r.caught_up:.2f} s (behind {r.behind})"])
    background, commit = results
    added = commit.remote - commit.plain
    section.rows.append(["floor: `git push` of one commit", "", fmt_time(floor), "", "", ""])
    section.targets.append(("a step with `wal.remote` (async) ≤ 1.1x one without",
                            fmt_ratio(background.ratio), background.ratio <= TARGET_ASYNC))
    section.notes.append(
        f"Commit durability adds {fmt_time(added)} to a step, "
        f"{added / floor:.2f}x a plain `git push` of one commit ({fmt_time(floor)}): the "
        "step's own process pushes its commit before it reports it, after the background "
        "pusher's push of its intent (about two pushes a step; folding them into one is "
        "the next cut).")
    section.notes.append(
        f"Batching: under async, {background.pushes} pushes carried {background.appends} "
        f"appends ({background.appends / max(1, background.pushes):.1f} per push) while "
        f"the steps ran {background.total_remote:.2f} s in all.")
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitwal-replication-") as tmp:
        work = Path(tmp)
        seal_environment(work / "home", work / "pycache")
        section = bench_replication(work, args.steps)
        print(section.render())
        for name, got, ok in section.targets:
            print(f"{name}: {got} ({met(ok)})")


if __name__ == "__main__":
    main()
