"""What a fetched log must satisfy before `git wal fetch` integrates it.

Two questions, both answered from the chains alone (no ref is moved here):

* is a fetched chain a log at all (:func:`chain_defect`): every append
  decodes, its records belong to the run, LSNs are dense and in order, the
  chain starts at the plan or a checkpoint (the chain checks of
  `git wal verify`, :mod:`gitwal.log.segments`);
* does a chain that is not a fast-forward of ours continue our records
  (:func:`compaction_defect`): a remote compaction is accepted only when an
  archive keeps our head and the new live chain agrees, LSN for LSN and
  byte for byte, with that archive where they overlap (docs/remotes.md).
  An archive ref is a name anyone who can push may plant, so the archive
  alone proves nothing: the records must join.
"""

from __future__ import annotations

import pygit2

from ..log.segments import Segment, read_segment


def _segment(repo: pygit2.Repository, run: str, ref: str, head: str,
             live: bool) -> tuple[Segment, str | None]:
    seg, failures = read_segment(repo, run, ref, head, live)
    if not failures:
        return seg, None
    first = failures[0]
    where = f"LSN {first.lsn}: " if first.lsn is not None else ""
    more = f" (and {len(failures) - 1} more problem(s))" if len(failures) > 1 else ""
    return seg, f"{where}{first.reason}{more}"


def chain_defect(repo: pygit2.Repository, run: str, ref: str, head: str,
                 live: bool = True) -> str | None:
    """The first reason the chain at ``head`` is not a valid log of ``run``, or None."""
    return _segment(repo, run, ref, head, live)[1]


def _records(seg: Segment) -> dict[int, bytes]:
    return {e.record.lsn: e.raw for e in seg.entries}


def compaction_defect(repo: pygit2.Repository, run: str, ours: str,
                      archive_ref: str, archive_head: str, theirs: str) -> str | None:
    """Why the live chain ``theirs`` does not continue ``ours`` through the archive, or None.

    Holds (returns None) only when all of these do:

    1. ``ours`` is the archive's head or an ancestor of it (the archive keeps
       every record we have);
    2. the archive's chain and ``theirs`` are valid logs of ``run``;
    3. ``theirs`` starts at or before the archive's last LSN (the chains
       overlap: the new one joins the old one) and ends at or after our last
       LSN (the live log never goes back);
    4. on every LSN both hold, the archive's record and ``theirs``' are the
       same bytes (so ``theirs`` also agrees with ours: ours is a prefix of
       the archive).
    """
    if not _descends(repo, archive_head, ours):
        return f"{archive_ref} does not keep the local head {ours[:12]}"
    old, bad = _segment(repo, run, archive_ref, archive_head, live=False)
    if bad:
        return f"{archive_ref} is not a valid log: {bad}"
    new, bad = _segment(repo, run, f"refs/wal/{run}", theirs, live=True)
    if bad:
        return f"the remote's chain is not a valid log: {bad}"
    old_recs, new_recs = _records(old), _records(new)
    if not old_recs or not new_recs:
        return "a chain holds no record"
    ours_last = max(e.record.lsn for e in
                    read_segment(repo, run, "ours", ours, live=True)[0].entries)
    if min(new_recs) > max(old_recs):
        return (f"the remote's chain starts at LSN {min(new_recs)}, after the archive's last "
                f"LSN {max(old_recs)}: it does not join it")
    if max(new_recs) < ours_last:
        return (f"the remote's chain ends at LSN {max(new_recs)}, before the local log's "
                f"LSN {ours_last}")
    for lsn in sorted(set(old_recs) & set(new_recs)):
        if old_recs[lsn] != new_recs[lsn]:
            return f"LSN {lsn} differs between {archive_ref} and the remote's chain"
    return None


def _descends(repo: pygit2.Repository, newer: str, older: str) -> bool:
    if newer == older:
        return True
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=newer), pygit2.Oid(hex=older)))
    except (KeyError, ValueError, pygit2.GitError):
        return False
