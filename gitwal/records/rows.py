"""The rows of `git wal log --json` (docs/format.md, "log output"; docs/json.md):
a run's records as they stream in, each intent with its status once known.
The CLI and the MCP server print the same rows."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from .codec import to_dict
from .model import Abort, Commit, Intent, Record, is_miss


def log_rows(records: Iterable[tuple[Record, bytes]]) -> Iterator[dict[str, Any] | bytes]:
    """The rows of `git wal log --json` (docs/format.md, "log output"), as
    the records stream in.

    A record that is not an intent is printed as its stored canonical bytes;
    an intent gains `status` and `prediction_miss` (docs/json.md). An intent's
    status is known at its closing record, so rows are held from the oldest
    open intent on and let go, in order, once it closes (memory: the records
    since the oldest open intent, normally one or two).
    """
    held: deque[tuple[Record, bytes]] = deque()
    closed: dict[int, Commit | Abort] = {}
    for rec, raw in records:
        if not held and not isinstance(rec, Intent):
            yield raw
            continue
        held.append((rec, raw))
        if isinstance(rec, (Commit, Abort)):
            closed[rec.intent] = rec
        while held and (not isinstance(held[0][0], Intent) or held[0][0].lsn in closed):
            first, first_raw = held.popleft()
            yield _row(first, first_raw, closed)
    for rec, raw in held:
        yield _row(rec, raw, closed)


def _row(rec: Record, raw: bytes, closed: dict[int, Commit | Abort]) -> dict[str, Any] | bytes:
    if not isinstance(rec, Intent):
        return raw
    closing = closed.pop(rec.lsn, None)
    d = to_dict(rec)  # target, pre and post stay lists, as stored
    d["status"] = ("committed" if isinstance(closing, Commit)
                   else "aborted" if isinstance(closing, Abort) else "open")
    # A prediction miss: the commit recorded what it observed, not what was predicted.
    d["prediction_miss"] = isinstance(closing, Commit) and is_miss(rec, closing)
    return d
