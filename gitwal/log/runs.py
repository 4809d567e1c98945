"""Which runs a repository holds, and which ones a command means.

Core, used alike by verify, push and fetch: a live log is ``refs/wal/<run>``
(:func:`list_runs`); a dropped or compacted run may live on only in
``refs/wal-archive/<run>/<n>``. A copy of another repository's logs keeps the
same names under another root (``refs/wal-remote/<remote>/wal/<run>``, ...:
:func:`under`), and is read there, never acted on.
"""

from __future__ import annotations

import pygit2

from ..base.errors import CorruptLog, UnknownRun
from ..base.ids import RunId, valid_run_id
from ..base.repository import wal_dir
from ..records.codec import encode
from ..records.model import Record
from .appends import REF_PREFIX
from .rewrite import ARCHIVE_PREFIX
from .store import Store

LOCAL = "refs/"  # the root of this repository's own log refs


def under(root: str, ref: str) -> str:
    """``ref`` (a name under ``refs/``) as kept under ``root``: ``refs/wal/r``
    under ``refs/wal-remote/origin/`` is ``refs/wal-remote/origin/wal/r``."""
    return root + ref[len(LOCAL):]


def list_runs(repo: pygit2.Repository) -> list[RunId]:
    """Run ids with a log, oldest first (run ids sort by time)."""
    names = [r[len(REF_PREFIX) :] for r in repo.references if r.startswith(REF_PREFIX)]
    return [RunId(n) for n in sorted(names)]


def all_runs(repo: pygit2.Repository, root: str = LOCAL) -> list[str]:
    """Runs with a live log or an archived segment (dropped runs too), oldest first;
    with ``root``, those of the copy kept there."""
    live, archive = under(root, REF_PREFIX), under(root, ARCHIVE_PREFIX)
    runs = {RunId(r[len(live):]) for r in repo.references if r.startswith(live)}
    for name in repo.references:
        if name.startswith(archive):
            run, _, n = name[len(archive):].rpartition("/")
            if valid_run_id(run) and n.isdigit():  # gitwal archives no other names
                runs.add(RunId(run))
    return sorted(runs)


def archived_heads(repo: pygit2.Repository, run: str,
                   root: str = LOCAL) -> list[tuple[int, str]]:
    """(n, head) of every archived segment of ``run`` kept under ``root``, oldest first."""
    prefix = under(root, f"{ARCHIVE_PREFIX}{run}/")
    return sorted((int(name[len(prefix):]), str(repo.references[name].target))
                  for name in repo.references
                  if name.startswith(prefix) and name[len(prefix):].isdigit())


def select_runs(repo: pygit2.Repository, run_id: str | None, everything: bool) -> list[str]:
    """--run ID, --all, or by default the current run (every run when there is none)."""
    known = all_runs(repo)
    if run_id is not None:
        if not valid_run_id(run_id) or run_id not in known:
            raise UnknownRun(f"no run {run_id}",
                             "list runs with `git wal runs` (or verify them all with --all)")
        return [run_id]
    if not everything:
        try:
            current = (wal_dir(repo) / "current").read_text().strip()
        except OSError:
            current = ""
        if current in known:
            return [current]
    return known


def segments_history(repo: pygit2.Repository, rid: RunId) -> list[tuple[Record, bytes]]:
    """Every record of run ``rid``, archived segments included, in LSN order.

    Segments overlap (an archive ends where the next segment's checkpoint
    already is); an LSN found twice must hold the same record both times.
    """
    store = Store(repo, rid)
    heads = [head for _, head in store.archives()]
    live = store.head()
    if live is not None:
        heads.append(live)
    if not heads:
        raise UnknownRun(f"no run {rid}", "list runs with `git wal runs`")
    seen: dict[int, tuple[Record, bytes]] = {}
    for head in heads:
        for _, batch in store.chain(head):
            for rec in batch:
                if rec.lsn in seen and seen[rec.lsn][1] != encode(rec):
                    raise CorruptLog(
                        f"run {rid}: LSN {rec.lsn} differs between archived and live "
                        "segments", "the archives were rewritten outside gitwal",
                    )
                seen[rec.lsn] = (rec, encode(rec))
    return [seen[k] for k in sorted(seen)]
