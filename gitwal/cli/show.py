"""`git wal show LSN`: one record, its closing, and its change as a diff.

A file step's change is each target's pre-image against its post-image (the
commit's observed post; the intent's predicted one while it is open or
after an abort), blobs read from the object database; an exec step's is
its pre tree against the post tree its commit names, every path the two
differ in. The diff is git's (libgit2's, ``git diff`` semantics): an absent
side is ``/dev/null``, a binary file says so. Objects are only read: a
record names them, nothing of the log is run or written.

Every line read from the log or the object database is printed through
:func:`gitwal.base.display.safe` (tabs kept): a hostile log or blob cannot drive
the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import click
import pygit2

from ..base.display import safe
from ..base.errors import WalError
from ..base.ids import ABSENT
from ..records.codec import encode
from ..records.model import EXEC_TOOL, Abort, Commit, Intent, Record
from ..records.rows import log_rows
from ..wal import Wal
from .failures import handled
from .options import JSON, RUN, VIEW
from .stdout import emit_json
from .terminal import Paint, colour_wanted, paged
from .timeline import AppendTimes, Timeline, moment, what


class UnknownLsn(WalError):
    """The run holds no record with that LSN."""


@dataclass(frozen=True, slots=True)
class Change:
    """One path a step changed: its states before and after, and the diff."""

    path: str
    pre: str  # object id or ABSENT
    post: str
    binary: bool
    diff: bytes | None  # git's unified diff; None: an object is missing (or not a blob/tree)

    def document(self) -> dict[str, Any]:
        return {"path": self.path, "pre": self.pre, "post": self.post, "binary": self.binary,
                "diff": None if self.binary or self.diff is None
                else self.diff.decode("utf-8", "replace")}


def find(records: Iterable[tuple[Record, bytes]], lsn: int
         ) -> tuple[Record, Commit | Abort | None] | None:
    """The record ``lsn`` (a closing: the intent it closes) and its closing.

    Streams: memory holds the intents not closed yet (at most one in a log
    gitwal wrote)."""
    opened: dict[int, Intent] = {}
    found: Record | None = None
    for rec, _raw in records:
        if isinstance(rec, Intent):
            opened[rec.lsn] = rec
        if rec.lsn == lsn:
            if isinstance(rec, (Commit, Abort)):
                intent = opened.get(rec.intent)
                return (intent, rec) if intent is not None else (rec, None)
            if not isinstance(rec, Intent):
                return rec, None
            found = rec
        if isinstance(rec, (Commit, Abort)):
            opened.pop(rec.intent, None)
            if found is not None and rec.intent == found.lsn:
                return found, rec
    return (found, None) if found is not None else None


def changes(repo: pygit2.Repository, intent: Intent, closing: Commit | Abort | None
            ) -> list[Change]:
    if intent.tool == EXEC_TOOL:
        if not isinstance(closing, Commit) or not closing.post:
            return []  # no post tree: the step was not committed
        theirs = {t[0] for t in closing.theirs}  # other runs' work (shell_among.py)
        return [c for c in _tree_changes(repo, intent.pre[0], closing.post[0])
                if c.path not in theirs]
    posts = (closing.post if isinstance(closing, Commit)
             else intent.post if intent.post is not None else ())
    out = []
    for path, pre, post in zip(intent.target, intent.pre, posts, strict=False):
        if pre != post:
            out.append(blob_change(repo, path, pre, post))
    return out


def _object(repo: pygit2.Repository, oid: str, kind: type[Any]) -> Any:
    """The object ``oid`` of type ``kind``, or None (absent, missing, another type)."""
    if oid == ABSENT:
        return None
    try:
        obj = repo.get(oid)
    except (ValueError, pygit2.GitError):
        return None
    return obj if isinstance(obj, kind) else None


def blob_change(repo: pygit2.Repository, path: str, pre: str, post: str) -> Change:
    old = _object(repo, pre, pygit2.Blob)
    new = _object(repo, post, pygit2.Blob)
    if (old is None and pre != ABSENT) or (new is None and post != ABSENT):
        return Change(path, pre, post, False, None)
    patch = pygit2.Patch.create_from(old, new, old_as_path=path, new_as_path=path)
    return Change(path, pre, post, bool(patch.delta.is_binary), patch.data)


def _tree_changes(repo: pygit2.Repository, pre: str, post: str) -> list[Change]:
    old = _object(repo, pre, pygit2.Tree)
    new = _object(repo, post, pygit2.Tree)
    if old is None or new is None:
        return [Change(".", pre, post, False, None)]
    out = []
    for patch in repo.diff(old, new):
        if patch is None:
            continue
        delta = patch.delta
        path = delta.new_file.path if delta.new_file.id != _ZERO else delta.old_file.path
        out.append(Change(path, _state(delta.old_file.id), _state(delta.new_file.id),
                          bool(delta.is_binary), patch.data))
    return out


_ZERO = pygit2.Oid(hex="0" * 40)


def _state(oid: pygit2.Oid) -> str:
    return ABSENT if oid == _ZERO else str(oid)


def _safe_line(line: str) -> str:
    """A diff line made safe, its tabs kept (they cannot drive a terminal)."""
    return "\t".join(safe(part) for part in line.split("\t"))


_DIFF_COLOURS = (("diff --git ", "bold"), ("index ", "bold"), ("--- ", "bold"),
                 ("+++ ", "bold"), ("new file", "bold"), ("deleted file", "bold"),
                 ("@@", "cyan"), ("-", "red"), ("+", "green"))


def diff_lines(change: Change, paint: Paint) -> Iterator[str]:
    if change.diff is None:
        yield paint(f"{safe(change.path)}: {change.pre[:12]} -> {change.post[:12]}: "
                    "an object is missing from the object database or is not what the "
                    "record says it is", "yellow")
        return
    text = change.diff.decode("utf-8", "surrogateescape")
    for line in text.splitlines():
        shown = _safe_line(line)
        colour = next((c for prefix, c in _DIFF_COLOURS if line.startswith(prefix)), None)
        yield paint(shown, colour)


def header(times: AppendTimes, paint: Paint, rec: Record,
           closing: Commit | Abort | None) -> Iterator[str]:
    """The record's timeline line, then its fields for people."""
    view = Timeline(times, paint)
    if not isinstance(rec, Intent):
        if isinstance(rec, (Commit, Abort)):  # its intent is not in the segment read
            yield view.closing(rec)
        else:
            yield view.other(rec)
        yield f"record: {safe(encode(rec).decode())}"
        return
    yield view.intent(rec, closing)
    label = "command" if rec.tool == EXEC_TOOL else "target"
    yield f"{label}: {what(rec, width=1 << 20)}"  # in full
    if rec.step is not None:
        yield f"step: {rec.step}"
    if rec.check is not None:
        yield f"check: {safe(rec.check)}"
    if closing is not None:
        kind = "commit" if isinstance(closing, Commit) else "abort"
        text = closing.verified if isinstance(closing, Commit) else closing.reason
        yield (f"closed: {kind} LSN {closing.lsn} at {moment(times.of(closing.lsn))}: "
               f"{safe(text)}")
        if isinstance(closing, Abort) and closing.output:
            yield "output:"
            yield from (f"    {_safe_line(line)}" for line in closing.output.splitlines())
    else:
        yield "closed: not yet (`git wal recover` decides a step a crash left open)"


def _document(rec: Record, closing: Commit | Abort | None,
              found: list[Change]) -> dict[str, Any]:
    pairs = [(rec, encode(rec))] + ([(closing, encode(closing))] if closing else [])
    rows = [row if isinstance(row, dict) else json.loads(row) for row in log_rows(pairs)]
    return {"record": rows[0], "closing": rows[1] if closing else None,
            "changes": [c.document() for c in found]}


@click.command()
@click.argument("lsn", type=click.IntRange(min=1))
@RUN
@JSON
@VIEW
@handled
def show(lsn: int, run_id: str | None, as_json: bool, color: str, no_color: bool,
         no_pager: bool) -> None:
    """Show one record, its closing and its change as a diff."""
    wal = Wal(".")
    run = wal.run(run_id, read_only=True)
    hit = find(run.stream(), lsn)
    if hit is None:  # perhaps in a segment `git wal compact` archived
        hit = find(wal.history(run.id), lsn)
    if hit is None:
        raise UnknownLsn(f"run {run.id} has no record with LSN {lsn}",
                         f"`git wal log --run {run.id} --all` lists its records")
    rec, closing = hit
    found = changes(wal.repo, rec, closing) if isinstance(rec, Intent) else []
    if as_json:
        emit_json(_document(rec, closing, found))
        return
    heads = [h for _, h in run.store.archives()]
    head = run.store.head()
    times = AppendTimes.read(wal.repo, heads + ([head] if head else []))
    paint = Paint(colour_wanted(color, no_color))
    with paged(not no_pager, wal.repo.config):
        for line in header(times, paint, rec, closing):
            paint.echo(line)
        if isinstance(rec, Intent) and rec.tool == EXEC_TOOL and found:
            paint.echo(f"changed: {len(found)} path(s)")
            for change in found:
                paint.echo(f"    {safe(change.path)}")
        for change in found:
            paint.echo("")
            for line in diff_lines(change, paint):
                paint.echo(line)
