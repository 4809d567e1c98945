"""One timed operation each: set up in the constructor, one unit of work per call.

Used in-process by bench/append.py and bench/step.py and under strace by
bench/probe.py, so the syscall counts describe exactly the code that was timed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from gitwal import Wal
from gitwal.base.errors import UnknownRun
from gitwal.base.ids import CommitId, Lsn, RunId
from gitwal.log.store import Store
from gitwal.records.codec import encode, to_dict
from gitwal.records.model import Abort, Plan
from gitwal.run import Run

from .baselines import SqliteLog, log_append, reference_step

STEP_PATH = "src/step.txt"


def record_for(run: RunId, lsn: int) -> Abort:
    """The record appended by the append benchmark (about 150 bytes of JSON)."""
    return Abort(run, Lsn(lsn), Lsn(lsn - 1), "bench: one durable append")


def step_body(k: int, nonce: str) -> bytes:
    """A new ~200-byte file content for step ``k`` (never repeats across processes)."""
    return (f"# step {k} ({nonce})\n" + f"value_{k} = {k} * 2\n" * 8).encode()


class GitwalAppend:
    """``Store.append`` of one record, under the run lock, LSNs consecutive."""

    def __init__(self, root: Path, run: str = "bench-append") -> None:
        self.repo = pygit2.Repository(str(root))
        self.run = RunId(run)
        self.store = Store(self.repo, self.run)
        head = self.store.head()
        if head is None:
            plan = Plan(self.run, Lsn(1), "append benchmark", str(self.repo.head.target),
                        None, ())
            with self.store.locked():
                head = self.store.append([plan], [], None)
        self.head: CommitId = head
        self.lsn: int = self.store.head_records(head)[-1].lsn

    def __call__(self) -> None:
        self.lsn += 1
        rec = record_for(self.run, self.lsn)
        with self.store.locked():
            self.head = self.store.append([rec], [], self.head)


class JsonlAppend:
    """The essay's ``log_append`` of the same record."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / "wal.jsonl"
        self.run = RunId("bench-jsonl")
        self.lsn = 1

    def __call__(self) -> None:
        self.lsn += 1
        log_append(self.path, to_dict(record_for(self.run, self.lsn)))


class SqliteAppend:
    """One INSERT of the same record per transaction, WAL mode, synchronous=FULL."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.db = SqliteLog(root / "wal.sqlite")
        self.run = RunId("bench-sqlite")
        self.lsn = 1

    def __call__(self) -> None:
        self.lsn += 1
        self.db.append(self.lsn, encode(record_for(self.run, self.lsn)).decode())


class GitwalStep:
    """``Run.apply("write_file", ...)``: intent, atomic write, verify, commit
    (``group_commit``: the commit rides in the next step's append)."""

    def __init__(self, root: Path, run: str = "bench-step", group_commit: bool = False) -> None:
        wal = Wal(root)
        try:
            self.run: Run = wal.run(run, group_commit=group_commit)
        except UnknownRun:
            self.run = wal.begin(task="step benchmark", run_id=run, group_commit=group_commit)
        self.nonce = os.urandom(6).hex()
        self.k = 0

    def __call__(self) -> None:
        self.k += 1
        self.run.apply("write_file", path=STEP_PATH, content=step_body(self.k, self.nonce))


class ReferenceStep:
    """The essay's reference step on the same file content."""

    def __init__(self, root: Path) -> None:
        (root / "src").mkdir(parents=True, exist_ok=True)
        self.log = root / "steps.jsonl"
        self.target = root / STEP_PATH
        self.nonce = os.urandom(6).hex()
        self.k = 0
        self.lsn = 1

    def __call__(self) -> None:
        self.k += 1
        self.lsn = reference_step(self.log, self.target, step_body(self.k, self.nonce),
                                  self.lsn)
