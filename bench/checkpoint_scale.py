"""Recovery cost with and without a checkpoint on a long run.

Builds runs of N records (intent + commit pairs on one file, one record per
append, as live steps write them) and times `git wal recover --json` and
`git wal status --json` as whole processes. Setup writes objects without
fsync to stay fast; the timed commands are the ordinary ones.

    python -m bench.checkpoint_scale [--sizes 1000,100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2

import gitwal.log.store
from gitwal import Wal
from gitwal.base.ids import CommitId, Lsn
from gitwal.checkpoints.checkpoint import checkpoint
from gitwal.log.store import Ref
from gitwal.records.model import Commit, Intent

GIT_WAL = str(Path(sys.executable).parent / "git-wal")
TAIL = 10  # records written after the checkpoint


def _step(store: gitwal.log.store.Store, head: CommitId | None, lsn: int,
          oid: str) -> CommitId:
    """One write_file step as a live run records it: intent append, commit append."""
    run = store.run
    intent = Intent(run, Lsn(lsn), "write_file", {"path": "a.txt", "content": oid},
                    ("a.txt",), (oid,), (oid,), (0o100644,), "safe", f"{run}:{lsn}")
    head = store.append([intent], [Ref(oid)], head)
    return store.append([Commit(run, Lsn(lsn + 1), Lsn(lsn), (oid,), "hash==post")], [], head)


def build(root: Path, records: int, with_checkpoint: bool) -> None:
    """A run of about ``records`` records; with a checkpoint TAIL records from the end."""
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "a.txt").write_text("v\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "i"], cwd=root, check=True, env=env)
    os.environ.update({k: v for k, v in env.items() if k.startswith("GIT_")})
    # Setup only: skip fsync so a 100k-record chain builds in seconds.
    pygit2.settings.enable_fsync_gitdir(False)
    gitwal.log.store.fsync_dir = lambda path: None  # type: ignore[attr-defined]
    run = Wal(root).begin(task="scale")
    store = run.store
    oid = store.put_blob((root / "a.txt").read_bytes())
    head = store.head()
    before = records - TAIL if with_checkpoint else records
    with store.locked():
        for lsn in range(2, before, 2):
            head = _step(store, head, lsn, oid)
    if with_checkpoint:
        checkpoint(run, detached=True)
        head = store.head()
        assert head is not None
        with store.locked():
            for lsn in range(store.head_records(head)[-1].lsn + 1, records, 2):
                head = _step(store, head, lsn, oid)


def timed(root: Path, *args: str, n: int = 5) -> tuple[float, float, float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([GIT_WAL, *args], cwd=root, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), max(times)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1000,100000")
    sizes = [int(x) for x in p.parse_args().sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for cp in (False, True):
                root = Path(tmp) / f"r{size}{'cp' if cp else ''}"
                t0 = time.perf_counter()
                build(root, size, cp)
                built = time.perf_counter() - t0
                rec = timed(root, "recover", "--json")
                st = timed(root, "status", "--json")
                rows.append((size, cp, built, rec, st))
    print("| records | checkpoint | recover median (min-max) s | status median (min-max) s |")
    print("| ---: | --- | --- | --- |")
    for size, cp, _built, rec, st in rows:
        where = f"yes, {TAIL} records before the end" if cp else "no"
        print(f"| {size:,} | {where} | {rec[1]:.3f} ({rec[0]:.3f}-{rec[2]:.3f}) | "
              f"{st[1]:.3f} ({st[0]:.3f}-{st[2]:.3f}) |")


if __name__ == "__main__":
    main()
