"""The JSON documents that `git wal ... --json` prints and the MCP server
returns as ``structuredContent`` (docs/json.md), built in one place so both
speak one vocabulary.

Invariants (docs/json.md, "Shared names"): an LSN is an integer; ``target``
(and an intent's ``pre`` and ``post``) is always a list; ``committed``,
``aborted``, ``open``, ``unlogged`` and ``prediction_miss`` are lists of LSNs;
an intent is named by ``lsn``, ``tool``, ``target`` and ``step`` wherever it
is described; an error is ``{error, hint, kind, exit_code}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI loads this for every command: keep imports lazy
    from .base.errors import WalError
    from .status import RunInfo, Status
    from .together.claims import Live


def worktree(wt: tuple[str, str] | None) -> dict[str, str] | None:
    """The worktree a run is bound to, as in the plan record (docs/format.md)."""
    return None if wt is None else {"name": wt[0], "path": wt[1]}


def status(st: Status) -> dict[str, Any]:
    """`git wal status --json`, and the MCP `status` tool's structured content."""
    return {"run": st.run, "task": st.task, "records": st.records,
            "committed": list(st.committed), "aborted": list(st.aborted),
            "open": list(st.open), "next_lsn": st.next_lsn,
            "checkpoint": st.checkpoint, "unlogged": list(st.unlogged),
            "prediction_miss": list(st.prediction_miss), "sealed": st.sealed,
            "worktree": worktree(st.worktree),
            "remote": None if st.remote is None else st.remote.to_dict()}


def run_info(info: RunInfo) -> dict[str, Any]:
    """One element of `git wal runs --json`."""
    return {"run": info.run, "task": info.task, "records": info.records,
            "open": list(info.open), "current": info.current,
            "worktree": worktree(info.worktree), "damaged": info.damaged,
            "claims": [claim(c) for c in info.claims],
            "remote_claims": [c.to_dict(trusted) for c, trusted in info.remote_claims],
            "remote": None if info.remote is None else info.remote.to_dict()}


def claim(c: Live) -> dict[str, Any]:
    """A live claim: its pattern, the record that made it, when it ends (Unix seconds)."""
    return {"run": c.run, "path": c.pattern, "lsn": c.lsn, "until": c.until}


def error(message: str, hint: str, kind: str, exit_code: int) -> dict[str, Any]:
    """A failure, as `--json` prints it and as an MCP tool error carries it."""
    return {"error": message, "hint": hint, "kind": kind, "exit_code": exit_code}


def wal_error(e: WalError) -> dict[str, Any]:
    return error(e.message, e.hint, type(e).__name__, e.exit_code)
