"""What replicating each append costs a step (docs/remote-runs.md, "Cost"):
``Run.apply`` in a loop, in process, on two clones of one repository, one
without a remote and one with ``wal.remote`` set to a bare repository served
by a real smart-HTTP server (lighttpd + git http-backend, tests/gitservers.py),
steps interleaved one for one; then the same with ``wal.remote.durability
commit``. Prints the median step of each and the ratios, how many pushes the
server received, and how long the remote took to catch up.

    python -m bench.replication [--steps N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gitwal.run import Run
from gitwal.wal import Wal
from tests.gitservers import HttpGitServer


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


def _compare(base: Path, server: HttpGitServer, steps: int, durability: str) -> None:
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
        time.sleep(0.05)
    caught_up = time.monotonic() - done
    med = {k: statistics.median(v) for k, v in times.items()}
    total = {k: sum(v) for k, v in times.items()}
    print(f"durability {durability}: {steps} steps each (2 appends per step)")
    print(f"  median step: no remote {med['plain'] * 1e3:.2f} ms, "
          f"wal.remote {med['remote'] * 1e3:.2f} ms: ratio {med['remote'] / med['plain']:.3f}")
    print(f"  total:       no remote {total['plain']:.3f} s, "
          f"wal.remote {total['remote']:.3f} s: ratio {total['remote'] / total['plain']:.3f}")
    print(f"  pushes received: {_pushes(server) - before} for {2 * steps + 1} appends; "
          f"remote caught up {caught_up:.2f} s after the last step (behind {state.behind})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--durability", choices=["async", "commit", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitwal-replication-") as tmp:
        base = Path(tmp)
        home = base / "home"
        home.mkdir()
        os.environ.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
                           "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                           "XDG_CONFIG_HOME": str(home / ".config"),
                           "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
                           "GIT_COMMITTER_NAME": "Bench",
                           "GIT_COMMITTER_EMAIL": "bench@example.com"})
        with HttpGitServer(base / "server") as server:
            for durability in (["async", "commit"] if args.durability == "both"
                               else [args.durability]):
                _compare(base, server, args.steps, durability)
            # The pushers linger; end them before their repositories go.
            for lock in base.glob("remote-*/.git/wal/replica/*/pusher.lock"):
                text = lock.read_text().strip()
                if text:
                    try:
                        os.kill(int(text), 15)
                    except ProcessLookupError:
                        pass


if __name__ == "__main__":
    main()
