"""What this process keeps of the runs it read: segments, root plans and head
appends, each by the commit that fixes it.

A commit id names its whole chain, so what is kept is exact and never
invalidated: an append, a compaction or a repair moves the ref to another
commit, which is another key. A long-lived process (the hook server, the MCP
server) then reads only what was appended since.
"""

from __future__ import annotations

import threading

from ..records.model import Plan, Record

SEGMENTS_KEPT = 16  # segments a process keeps (see Segments)


class Segments:
    """The segments this process read, by (repository, run, head commit).

    A commit id names its whole chain, so a kept segment is exact for its head
    and is never invalidated: an append, a compaction or a repair moves the
    ref to another commit, which is another key. Only the newest
    :data:`SEGMENTS_KEPT` used are kept. Thread-safe: the hook server reads
    runs from several threads.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str, str], tuple[Record, ...]] = {}
        self._guard = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[Record, ...] | None:
        with self._guard:
            kept = self._kept.pop(key, None)
            if kept is not None:
                self._kept[key] = kept  # now the newest used
            return kept

    def put(self, key: tuple[str, str, str], records: list[Record]) -> None:
        with self._guard:
            self._kept.pop(key, None)
            self._kept[key] = tuple(records)
            while len(self._kept) > SEGMENTS_KEPT:
                del self._kept[next(iter(self._kept))]  # the least recently used

    def clear(self) -> None:
        with self._guard:
            self._kept.clear()


SEGMENTS = Segments()
# (repository, run) -> (an append, the run's plan): see Chain.root_plan.
ROOT_PLANS: dict[tuple[str, str], tuple[str, Plan]] = {}
# (repository, run) -> (its newest append read, that append's records): see
# Chain.head_records.
HEADS: dict[tuple[str, str], tuple[str, tuple[Record, ...]]] = {}
