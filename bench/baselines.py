"""The baselines gitwal is measured against: the essay's JSONL ``log_append``,
its reference step (JSONL intent, atomic write, hash verify, JSONL commit), and
SQLite in WAL mode with ``synchronous=FULL``. Each is as durable as gitwal
claims to be for a process crash (every record fsynced before it returns)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any


def log_append(path: Path, record: dict[str, Any]) -> None:
    """The essay's durable append: one JSON line, flushed and fsynced."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename over, fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def sha256_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def reference_step(log: Path, target: Path, content: bytes, lsn: int) -> int:
    """The essay's logged end-state edit; returns the next LSN.

    Intent line (pre and post hashes) + fsync, atomic write, re-read and
    hash-verify, commit line + fsync.
    """
    pre = sha256_file(target)
    post = hashlib.sha256(content).hexdigest()
    log_append(log, {"type": "intent", "lsn": lsn, "tool": "write_file",
                     "path": target.name, "pre": pre, "post": post})
    atomic_write(target, content)
    if sha256_file(target) != post:
        log_append(log, {"type": "abort", "lsn": lsn + 1, "intent": lsn})
        raise RuntimeError(f"{target}: post-image hash mismatch")
    log_append(log, {"type": "commit", "lsn": lsn + 1, "intent": lsn, "post": post})
    return lsn + 2


class SqliteLog:
    """One row per record, one transaction per append, WAL + synchronous=FULL."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)  # autocommit
        mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(f"sqlite refused WAL mode (got {mode!r})")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS log (lsn INTEGER PRIMARY KEY, body TEXT NOT NULL)"
        )

    def append(self, lsn: int, body: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO log (lsn, body) VALUES (?, ?)", (lsn, body))
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()
