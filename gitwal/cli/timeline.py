"""`git wal log` for people: one line per step, as the records stream in.

An intent's line carries its closing (outcome, duration), so a line waits
for the closing record, and the lines after it wait with it (memory: the
records since the oldest open intent, normally one or two). Every string
read from the log is printed through :func:`gitwal.base.display.safe`: a hostile
log cannot drive the terminal.

A record carries no time. The time of a line is the committer date of the
append commit that holds the record (docs/format.md: one append names the
LSN of its last record in its message), read once per append from the raw
commits before the records stream (:class:`AppendTimes`). Like any commit
date it is its writer's claim, for people only: nothing is decided by it.
"""

from __future__ import annotations

import shlex
import time
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator

import pygit2

from ..base.display import safe
from ..base.errors import WalError
from ..log.store import Store
from ..records.model import (
    EXEC_TOOL,
    Abort,
    Approval,
    Checkpoint,
    Claim,
    Commit,
    Intent,
    Plan,
    Record,
    Seal,
    Takeover,
    Unlogged,
    is_miss,
)
from ..wal import Wal
from .terminal import Paint, colour_wanted, paged

WHAT_WIDTH = 72  # a target list or command longer than this is cut, with "..."
TEXT_WIDTH = 100  # a reason, task or check longer than this is cut
NO_TIME = "????-??-?? ??:??:??"


class AppendTimes:
    """The committer date of each append, by the LSN of its last record.

    Read from the raw commits, newest first (one object read per append, no
    tree or record read); 16 bytes per append. A message that names no LSN
    (not written by gitwal) leaves its records' time unknown."""

    def __init__(self) -> None:
        self._last = array("q")  # per append, ascending: the LSN of its last record
        self._when = array("q")  # its committer date (Unix seconds)

    @classmethod
    def read(cls, repo: pygit2.Repository, heads: Iterable[str]) -> AppendTimes:
        """The appends reachable from each of ``heads`` (a live ref's head, an
        archive's): an LSN met in several chains keeps the first time read."""
        pairs: dict[int, int] = {}
        for head in heads:
            for lsn, when in _walk(repo, head):
                pairs.setdefault(lsn, when)
        times = cls()
        for lsn in sorted(pairs):
            times._last.append(lsn)
            times._when.append(pairs[lsn])
        return times

    def of(self, lsn: int) -> int | None:
        """The date of the append holding ``lsn``: the first whose last LSN is >= it."""
        i = bisect_left(self._last, lsn)
        return self._when[i] if i < len(self._last) else None


def _walk(repo: pygit2.Repository, head: str) -> Iterator[tuple[int, int]]:
    """(last LSN, committer date) of each append from ``head`` to the root."""
    odb = repo.odb
    oid: str | None = head
    while oid is not None:
        try:
            _kind, data = odb.read(oid)
        except (KeyError, ValueError, pygit2.GitError):
            return  # the stream that follows names the defect
        header, _, message = bytes(data).partition(b"\n\n")
        parent = None
        when = None
        for line in header.split(b"\n"):
            if line.startswith(b"parent ") and parent is None:
                parent = line[7:47].decode("ascii", "replace")
            elif line.startswith(b"committer "):
                parts = line.rsplit(b" ", 2)
                when = int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
        words = message.split(b" ", 2)
        if when is not None and len(words) >= 2 and words[0] == b"wal" and words[1].isdigit():
            yield int(words[1]), when
        oid = parent


def moment(when: int | None) -> str:
    """A date as local time, seconds (git's `--date=iso-local`, without the zone)."""
    if when is None:
        return NO_TIME
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def duration(seconds: int) -> str:
    """``0s``, ``42s``, ``3m05s``, ``2h07m``: commit dates count whole seconds."""
    seconds = max(seconds, 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def cut(text: str, width: int) -> str:
    """``text`` made safe, then cut to ``width`` characters (``...`` marks a cut)."""
    shown = safe(text)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def what(intent: Intent, width: int = WHAT_WIDTH) -> str:
    """The step's object: its command (an exec, shell-quoted) or its targets,
    made safe and cut to ``width``."""
    if intent.tool == EXEC_TOOL:
        argv = intent.args.get("argv")
        words = [str(w) for w in argv] if isinstance(argv, list) else []
        return cut(shlex.join(words), width)
    if intent.tool == "move_file" and len(intent.target) == 2:
        return cut(f"{intent.target[0]} -> {intent.target[1]}", width)
    return cut(" ".join(intent.target), width)


def outcome(closing: Commit | Abort | None, in_doubt: bool = False) -> str:
    if isinstance(closing, Commit):
        return "committed"
    if isinstance(closing, Abort):
        return "aborted"
    return "in doubt" if in_doubt else "open"


class Timeline:
    """Renders the records of one run as lines (see the module docstring).

    ``records``: one line per record, closings too (``--records``);
    ``in_doubt``: whether an open intent's command may have run with nothing
    holding it any more (its command lock file is left, unheld): recovery
    will have to decide it from the tree."""

    def __init__(self, times: AppendTimes, paint: Paint, records: bool = False,
                 in_doubt: Callable[[Intent], bool] = lambda _intent: False) -> None:
        self.times = times
        self.paint = paint
        self.per_record = records
        self.in_doubt = in_doubt

    def lines(self, stream: Iterable[tuple[Record, bytes]]) -> Iterator[str]:
        held: deque[Record] = deque()
        closed: dict[int, Commit | Abort] = {}
        for rec, _raw in stream:
            if not held and not isinstance(rec, Intent):
                yield from self._plain(rec)
                continue
            held.append(rec)
            if isinstance(rec, (Commit, Abort)):
                closed[rec.intent] = rec
            while held and (not isinstance(held[0], Intent) or held[0].lsn in closed):
                yield from self._line(held.popleft(), closed)
        while held:
            yield from self._line(held.popleft(), closed)

    def _line(self, rec: Record, closed: dict[int, Commit | Abort]) -> Iterator[str]:
        if isinstance(rec, Intent):
            yield self.intent(rec, closed.pop(rec.lsn, None))
        else:
            yield from self._plain(rec)

    def _plain(self, rec: Record) -> Iterator[str]:
        if isinstance(rec, (Commit, Abort)):
            if self.per_record:  # else folded into its intent's line
                yield self.closing(rec)
            return
        yield self.other(rec)

    def _head(self, lsn: int, label: str, colour: str | None, took: str = "") -> str:
        p = self.paint
        return (f"{p(f'{lsn:>6}', 'yellow')}  {moment(self.times.of(lsn))}  "
                f"{p(f'{label:<10}', colour)} {took:>6}  ")

    def intent(self, rec: Intent, closing: Commit | Abort | None) -> str:
        result = outcome(closing, closing is None and self.in_doubt(rec))
        colour = {"committed": "green", "aborted": "red"}.get(result, "yellow")
        took = ""
        if closing is not None:
            start, end = self.times.of(rec.lsn), self.times.of(closing.lsn)
            took = duration(end - start) if start is not None and end is not None else "?"
        parts = [f"step {rec.step}"] if rec.step is not None else []
        parts.append(f"{self.paint(rec.tool, 'bold')} {what(rec)}")
        if rec.check is not None:
            parts.append(f"check: {cut(rec.check, TEXT_WIDTH)}")
        if rec.tool == "undo":  # the steps it took back (the log names them once, here)
            parts.append(cut(f"(undoes LSN {', '.join(map(str, rec.args.get('undoes', [])))})",
                             TEXT_WIDTH))
        elif rec.tool == "redo":
            parts.append(cut(f"(redoes undo LSN {rec.args.get('redoes')})", TEXT_WIDTH))
        if isinstance(closing, Commit) and is_miss(rec, closing):
            parts.append("(prediction miss)")
        if isinstance(closing, Abort) and not self.per_record:
            parts.append(f"({cut(closing.reason, TEXT_WIDTH)})")
        return self._head(rec.lsn, result, colour, took) + "  ".join(parts)

    def closing(self, rec: Commit | Abort) -> str:
        if isinstance(rec, Commit):
            text = f"closes {rec.intent}: {cut(rec.verified, TEXT_WIDTH)}"
            return self._head(rec.lsn, "commit", "green") + text
        return self._head(rec.lsn, "abort", "red") + (
            f"closes {rec.intent}: {cut(rec.reason, TEXT_WIDTH)}")

    def other(self, rec: Record) -> str:
        if isinstance(rec, Plan):
            where = f"on {cut(rec.branch, 40)}, " if rec.branch else "detached, "
            steps = f", {len(rec.steps)} steps" if rec.steps else ""
            text = f"{cut(rec.task, TEXT_WIDTH)} ({where}base {rec.base[:12]}{steps})"
            return self._head(rec.lsn, "plan", "cyan") + text
        if isinstance(rec, Checkpoint):
            text = f"{rec.git[:12]} on {cut(rec.ref, 60)} covers {rec.covers}"
            return self._head(rec.lsn, "checkpoint", "cyan") + text
        if isinstance(rec, Unlogged):
            theirs = {t[0]: t for t in rec.theirs}
            own = [p for p in rec.paths if p not in theirs]
            by = "; ".join(f"{p} by run {r} LSN {n}" for p, r, n in rec.theirs)
            text = (f"changed without an intent: {cut(' '.join(own), WHAT_WIDTH)} "
                    if own else "") + (f"changed by other runs: {cut(by, WHAT_WIDTH)} "
                                       if by else "") + f"({cut(rec.noticed, 60)})"
            return self._head(rec.lsn, "unlogged" if own else "seen", "magenta") + text
        if isinstance(rec, Seal):
            text = f"sealed after LSN {rec.last} (tree {rec.tree[:12]})"
            return self._head(rec.lsn, "seal", "cyan") + text
        if isinstance(rec, Approval):
            text = f"approves {rec.intent} ({cut(rec.approved_by, 60)})" + (
                f": {cut(rec.note, TEXT_WIDTH)}" if rec.note else "")
            return self._head(rec.lsn, "approval", "cyan") + text
        if isinstance(rec, Claim):
            what = (f"releases {cut(' '.join(rec.paths), WHAT_WIDTH)}" if rec.ttl == 0 else
                    f"claims {cut(' '.join(rec.paths), WHAT_WIDTH)} for {rec.ttl} s")
            return self._head(rec.lsn, "claim", "cyan") + what
        if isinstance(rec, Takeover):
            text = (f"taken over in {cut(rec.host, 60)} (clone {rec.clone}, remote "
                    f"{cut(rec.remote, 40)}) from {rec.taken[:12]}")
            return self._head(rec.lsn, "takeover", "cyan") + text
        raise TypeError(f"not a plain record: {type(rec).__name__}")


def timeline(wal: Wal, run_id: str | None, everything: bool, per_record: bool,
             color: str, no_color: bool, no_pager: bool) -> None:
    """`git wal log` without `--json`: the run's lines, into the pager on a terminal."""
    run = wal.run(run_id, read_only=True) if not everything else None
    store = run.store if run is not None else _any_store(wal, run_id)
    heads: list[str] = []
    if store is not None:
        if everything:
            heads += [head for _, head in store.archives()]
        head = store.head()
        if head is not None:
            heads.append(head)
    # A bad run id or a missing run fails here, before any pager starts.
    stream: Iterable[tuple[Record, bytes]] = (
        iter(wal.history(run_id)) if everything or run is None else run.stream())
    times = AppendTimes.read(wal.repo, heads)

    def in_doubt(intent: Intent) -> bool:
        # An exec whose command may have started (its lock file is there) and
        # that nothing runs any more: recovery decides it from the tree.
        return (store is not None and intent.tool == EXEC_TOOL
                and store.command_started(intent.lsn)
                and store.command_running(intent.lsn) is None)

    paint = Paint(colour_wanted(color, no_color))
    view = Timeline(times, paint, per_record, in_doubt)
    with paged(not no_pager, wal.repo.config):
        for line in view.lines(stream):
            paint.echo(line)


def _any_store(wal: Wal, run_id: str | None) -> Store | None:
    """The run's store for `--all`, also when only archives are left of it."""
    try:
        return wal.run(run_id, read_only=True).store
    except WalError:
        return None
