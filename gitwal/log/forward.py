"""Reading a run's records oldest first, one append at a time: memory holds
the appends' ids (40 bytes each), never the records. Every record is checked
as it is read (chaincheck.py); the base of :class:`~gitwal.log.chain.Chain`,
whose ``stream`` and ``forward`` read through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pygit2

from ..base.ids import CommitId
from ..records.model import Checkpoint, Record
from .appends import AppendReader
from .chaincheck import ChainCheck

# The message of an append whose last record is a checkpoint (records.model.summary).
_CHECKPOINT_MESSAGE = re.compile(rb"wal [0-9]+ checkpoint ")


class ForwardWalk(AppendReader):
    """The walk behind :meth:`Chain.stream` and :meth:`Chain.forward`."""

    def _read_forward(self, head: CommitId, to_checkpoint: bool
                      ) -> Iterator[tuple[Record, bytes]]:
        """(record, bytes) from the root (or, ``to_checkpoint``, from the newest
        checkpoint the messages name) to ``head``, each checked as it is read."""
        ids = self._ids_newest_first(head, to_checkpoint)
        check = ChainCheck(self.ref_name)
        for end in range(len(ids), 0, -40):
            batch = self._tree_raw(ids[end - 40 : end - 20].hex(),
                                   pygit2.Oid(raw=bytes(ids[end - 20 : end])))
            if to_checkpoint and end == len(ids):
                cps = [i for i, (r, _) in enumerate(batch) if isinstance(r, Checkpoint)]
                batch = batch[cps[-1] :] if cps else batch
            for rec, data in batch:
                check(rec)
                yield rec, data

    def _ids_newest_first(self, head: CommitId, to_checkpoint: bool = False) -> bytearray:
        """The raw ids of every append from ``head`` back to the root (or, with
        ``to_checkpoint``, to the append whose message names a checkpoint),
        each commit id followed by its tree id (40 bytes per append, newest
        first: 4 MB for 100,000 appends), read from the raw commits; a missing
        commit or a second parent raises as in a walk."""
        ids = bytearray()
        odb = self.repo.odb
        oid: str | None = head
        while oid is not None:
            try:
                kind, data = odb.read(oid)
            except (KeyError, ValueError, pygit2.GitError):
                self._commit(oid)  # raises, naming the missing commit
                raise
            if kind != pygit2.enums.ObjectType.COMMIT or not data.startswith(b"tree "):
                self._commit(oid)  # raises: not a commit
                raise self._corrupt(oid, "the append commit cannot be parsed")
            ids += bytes.fromhex(oid)
            ids += bytes.fromhex(data[5:45].decode())
            if to_checkpoint and _CHECKPOINT_MESSAGE.match(data, data.find(b"\n\n") + 2):
                break
            # "tree <hex>\n" then zero or more "parent <hex>\n" lines.
            parents = data[46:].split(b"\nauthor ", 1)[0]
            if parents.count(b"parent ") > 1:
                raise self._corrupt(oid, "an append commit has more than one parent")
            oid = parents[7:47].decode() if parents.startswith(b"parent ") else None
        return ids
