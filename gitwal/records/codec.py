"""Records <-> bytes: the canonical encoding, and decoding that refuses what
it does not know (docs/format.md "Encoding"). The only place records become
bytes, or bytes records; the fields of each decoded record are checked by
validate.py before a record exists.

A record is one JSON object, encoded with sorted keys, no insignificant white
space, UTF-8. Every record carries ``v`` (format version) and ``type``; a
reader refuses a version it does not know instead of guessing.
"""

from __future__ import annotations

import json
from typing import Any

from ..base.errors import CorruptLog
from .model import FORMAT_VERSION, TYPES, Plan, Record, Takeover, type_name
from .validate import build

MAX_DEPTH = 32  # JSON nesting a record may have; gitwal's own records need 4

# Fields added to the format after version 1 shipped: encoded only when they
# carry something, so records without them stay byte-identical (and canonical).
OPTIONAL_FIELDS = frozenset({"saved", "auth", "worktree", "decided_by", "note", "theirs",
                             "claimed", "withheld"})


def to_dict(record: Record) -> dict[str, Any]:
    """The record as plain data, with ``v`` and ``type``; lists for tuples."""
    out: dict[str, Any] = {"v": FORMAT_VERSION, "type": type_name(record)}
    for name in record.__dataclass_fields__:
        value = getattr(record, name)
        if name in OPTIONAL_FIELDS and not value:
            continue
        out[name] = [_plain(v) for v in value] if isinstance(value, tuple) else value
    if isinstance(record, Plan | Takeover) and "worktree" in out:
        wt = out["worktree"]
        out["worktree"] = {"name": wt[0], "path": wt[1]}
    return out


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def encode(record: Record) -> bytes:
    """Canonical bytes: the same record always encodes to the same blob."""
    return json.dumps(
        to_dict(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def decode(data: bytes, where: str) -> Record:
    """Parse and validate one record blob; ``where`` names it in errors."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _corrupt(where, f"not valid UTF-8 JSON ({e})") from None
    except RecursionError:
        raise _corrupt(where, "JSON nested too deeply") from None
    if not isinstance(raw, dict):
        raise _corrupt(where, "not a JSON object")
    # Depth never exceeds the count of opening brackets (those inside strings
    # included): the walk runs only for a record that could be too deep.
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and _too_deep(raw):
        # Every later reader (printing, hashing, --json) recurses over it too.
        raise _corrupt(where, f"JSON nested more than {MAX_DEPTH} levels deep")
    version = raw.get("v")
    if type(version) is not int or version != FORMAT_VERSION:
        raise CorruptLog(
            f"{where}: record format version {version!r} is not supported "
            f"(this gitwal reads version {FORMAT_VERSION})",
            "upgrade gitwal to read this log, or check that the ref holds a gitwal log",
        )
    kind = raw.get("type")
    cls = TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise _corrupt(where, f"unknown record type {raw.get('type')!r}")
    fields = cls.__dataclass_fields__
    body = {k: v for k, v in raw.items() if k not in ("v", "type")}
    unknown = set(body) - set(fields)
    if unknown:
        raise _corrupt(where, f"unknown fields {sorted(unknown)}")
    try:
        record = build(cls, body)
    except (TypeError, ValueError) as e:
        raise _corrupt(where, f"{kind} LSN {body.get('lsn')!r}: {e}") from None
    return record


def _too_deep(value: Any) -> bool:
    """True when ``value`` nests lists/objects more than MAX_DEPTH deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _corrupt(where: str, why: str) -> CorruptLog:
    return CorruptLog(
        f"{where}: corrupt record: {why}",
        "the log was damaged or written by something else; `git wal log` shows the "
        "records before it, and nothing after it is trusted",
    )

