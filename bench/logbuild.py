"""Grow a run through gitwal's own writer, as `Run.apply("write_file", ...)` does.

``python -m bench.logbuild ROOT RUN STEPS DURABLE`` appends ``STEPS`` committed
``write_file`` steps to run ``RUN`` of the repository at ``ROOT`` (begun if
absent) and prints what it took as one JSON object. A step is what
``Run.apply`` writes: the pre- and post-image blobs (``Store.put_blob``), an
intent append naming them, then a commit append: two ``Store.append`` calls,
one record each, under the run lock. The working tree is not touched while
the run grows (that is the step's file write, not the log's); at the end
every path holds its last committed content, so recovery finds nothing open
and no drift.

The first ``DURABLE`` steps are timed as gitwal runs them (every fsync). The
rest run with fsync switched off in this process only (``os.fsync`` and
libgit2's): the same files, packs and merges, without waiting for the disk,
so that 100,000 records build in minutes. Run as a child process so that no
switched-off fsync and none of the builder's memory leaks into the bench.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pygit2

from gitwal import Wal
from gitwal.base.errors import UnknownRun
from gitwal.base.ids import Lsn
from gitwal.log.store import Ref
from gitwal.records.model import REPLAY_SAFE, Commit, Intent
from gitwal.worktree.tree import MODE_FILE

PATHS = [f"src/f{i:02d}.txt" for i in range(20)]  # the files the steps rewrite in turn


def content(path: str, step: int) -> bytes:
    return f"{path} version {step}\n".encode()


def fsync_off() -> None:
    """No fsync in this process from here on (setup only; the layout is unchanged)."""
    pygit2.settings.enable_fsync_gitdir(False)
    os.fsync = lambda fd: None


def grow(root: Path, run_id: str, steps: int, durable: int) -> dict[str, float]:
    wal = Wal(root)
    try:
        run = wal.run(run_id)
    except UnknownRun:
        run = wal.begin(task=f"bench run of {run_id}", run_id=run_id)
    store = run.store
    head = store.head()
    assert head is not None
    lsn = store.head_records(head)[-1].lsn + 1
    first = (lsn - 2) // 2  # steps already in the run: step k writes PATHS[k % 20]
    with store.locked():
        current = {p: store.put_blob((root / p).read_bytes()) for p in PATHS}
        marks = [time.perf_counter()]
        for k in range(first, first + steps):
            if k - first == durable:
                marks.append(time.perf_counter())
                fsync_off()
            path = PATHS[k % len(PATHS)]
            pre, post = current[path], store.put_blob(content(path, k))
            intent = Intent(
                run=run.id, lsn=Lsn(lsn), tool="write_file",
                args={"path": path, "content": post}, target=(path,), pre=(pre,),
                post=(post,), mode=(MODE_FILE,), replay=REPLAY_SAFE, key=f"{run.id}:{lsn}")
            refs = sorted((Ref(o) for o in {pre, post}), key=lambda r: r.oid)
            head = store.append([intent], refs, head)
            head = store.append([Commit(run.id, Lsn(lsn + 1), Lsn(lsn), (post,), "hash==post")],
                                [], head)
            current[path] = post
            lsn += 2
        marks.append(time.perf_counter())
    if len(marks) == 2:  # every step was durable
        marks.insert(1, marks[1])
    last = first + steps - 1
    for i, path in enumerate(PATHS):
        mine = [k for k in range(max(0, last - len(PATHS) + 1), last + 1) if k % len(PATHS) == i]
        if mine:
            (root / path).write_bytes(content(path, mine[-1]))
    done = min(durable, steps)
    return {"records": lsn - 1, "durable_steps": done, "durable_seconds": marks[1] - marks[0],
            "fast_steps": steps - done, "fast_seconds": marks[2] - marks[1]}


def main() -> None:
    root, run_id, steps, durable = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(grow(Path(root), run_id, steps, durable)))


if __name__ == "__main__":
    main()
