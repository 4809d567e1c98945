"""The objects check of `git wal verify`: every object a record names is in
the repository, has the type the record says, and is kept alive by an
``obj-<oid>`` entry of its append or an earlier one (so `git gc` cannot drop it).

Withheld images (secret-looking files) are named by id only and never checked.
"""

from __future__ import annotations

import pygit2
from pygit2.enums import ObjectType

from ..base.ids import ABSENT, UNKNOWN
from ..log.segments import Failure, Segment, object_kind
from ..records.model import Checkpoint, Commit, Intent, Record, Seal, Unlogged
from .replay import short


def named_objects(rec: Record, intents: dict[int, Intent]) -> list[tuple[str, str, ObjectType]]:
    """(object id, what it is, its type) for every object ``rec`` names."""
    out: list[tuple[str, str, ObjectType]] = []
    if isinstance(rec, Intent):
        if rec.tool == "exec":
            out.append((rec.pre[0], "pre tree", ObjectType.TREE))
        else:
            for path, pre, post in zip(rec.target, rec.pre, rec.post or rec.pre, strict=True):
                if path in rec.withheld:
                    continue  # ids only: no append keeps a secret's bytes (docs/format.md)
                out += [(pre, f"pre-image of {path}", ObjectType.BLOB),
                        (post, f"post-image of {path}", ObjectType.BLOB)]
    elif isinstance(rec, Commit):
        intent = intents.get(rec.intent)
        if intent is not None and intent.tool == "exec":
            out += [(p, "post tree", ObjectType.TREE) for p in rec.post]
        else:
            paths = intent.target if intent else tuple(f"#{n}" for n in range(len(rec.post)))
            out += [(p, f"post-image of {t}", ObjectType.BLOB)
                    for t, p in zip(paths, rec.post, strict=False)
                    if intent is None or t not in intent.withheld]
    elif isinstance(rec, Checkpoint):
        out += [(rec.tree, "checkpoint tree", ObjectType.TREE),
                (rec.plan, "plan blob", ObjectType.BLOB)]
    elif isinstance(rec, Seal):
        out.append((rec.tree, "sealed tree", ObjectType.TREE))
    elif isinstance(rec, Unlogged):
        out += [(o, f"observed state of {p}", ObjectType.BLOB)
                for p, o in zip(rec.paths, rec.observed, strict=False)]
    return [x for x in out if x[0] not in (ABSENT, UNKNOWN)]


def object_failures(repo: pygit2.Repository, run: str, segments: list[Segment],
                    intents: dict[int, Intent]) -> list[Failure]:
    """Each named object exists, has its type, and an obj-<oid> entry of this append
    or an earlier one keeps it (so `git gc` cannot drop it)."""
    out: list[Failure] = []
    for seg in segments:
        kept: set[str] = set()
        for append in seg.appends:
            kept |= append.objects
            for e in append.entries:
                for oid, what, want in named_objects(e.record, intents):
                    kind = object_kind(repo, oid)
                    where = f"LSN {e.record.lsn} names {what} {short(oid)}"
                    if kind is None:
                        reason = f"{where}, which is missing from the repository"
                    elif kind != want:
                        reason = f"{where}, which is a {kind.name.lower()}"
                    elif oid not in kept:
                        reason = (f"{where}, but no obj-{short(oid)} entry of its append "
                                  f"({append.oid[:12]}) or an earlier one keeps it alive")
                    else:
                        continue
                    out.append(Failure(run, "objects", reason, e.record.lsn))
    return out


def is_kind(repo: pygit2.Repository, oid: str, kind: ObjectType) -> bool:
    return object_kind(repo, oid) == kind
