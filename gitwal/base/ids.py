"""Distinct types for the identifiers a record carries.

A blob id, a tree id and a commit id are all 40-hex strings to git, but
mixing them up is a bug: ``NewType`` lets mypy catch it.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import NewType

RunId = NewType("RunId", str)
Lsn = NewType("Lsn", int)
BlobId = NewType("BlobId", str)
TreeId = NewType("TreeId", str)
CommitId = NewType("CommitId", str)

# The state of a path that does not exist. Distinct from every object id and
# from ``None`` (which in a record means "not known in advance").
ABSENT = "absent"
# The post state of an agent's file step whose effect gitwal could not compute
# in advance (intents only; its commit records what was observed). Never
# equal to a path's state, so nothing is ever taken for it.
UNKNOWN = "unknown"

_HEX = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_RUN = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,99}")


def is_object_id(value: str) -> bool:
    """True for a full SHA-1 (or SHA-256) hex object id."""
    return _HEX.fullmatch(value) is not None


def valid_run_id(value: str) -> bool:
    """Run ids become ref names and file names: keep them to a safe alphabet."""
    return (
        _RUN.fullmatch(value) is not None
        and ".." not in value
        and not value.endswith((".", ".lock"))
    )


def new_run_id() -> RunId:
    """Sorts by creation time, safe as a ref and file name."""
    return RunId(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(2))
