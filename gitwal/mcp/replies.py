"""A call's outcome as a :class:`Reply`: a short text for the model and the same
facts as data. A refusal is a reply too, never an exception, carrying the
error's message and hint in the error document (docs/json.md, "Errors").
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import pygit2

from .. import documents
from ..base.errors import StepFailed, WalError
from ..base.ids import Lsn, TreeId
from ..records.model import Abort, Commit, Intent, Record
from ..run import Run, StepResult
from .capture import OUTPUT_TAIL, Captured


@dataclass(frozen=True)
class Reply:
    ok: bool  # False: the client sees a tool error (isError)
    text: str
    data: dict[str, Any] = field(default_factory=dict)


def refusal(e: WalError, extra: dict[str, Any] | None = None) -> Reply:
    text = f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else "")
    data = documents.wal_error(e)  # the shape `--json` prints (docs/json.md, "Errors")
    data.update(extra or {})
    if data.get("output"):
        text += f"\n--- output (last {OUTPUT_TAIL} characters) ---\n{data['output']}"
    return Reply(False, text, data)


def _recent(run: Run, lsn: Lsn) -> list[Record]:
    """Records that hold intent ``lsn`` and what closes it: normally the newest
    two appends (one commit and one tree each); the whole segment only when
    another process appended in between."""
    records = run.recent(appends=2)
    if not any(isinstance(r, Intent) and r.lsn == lsn for r in records):
        records = run.since_checkpoint()
    return records


def _closing(records: list[Record], lsn: Lsn) -> Commit | Abort | None:
    for r in records:
        if isinstance(r, (Commit, Abort)) and r.intent == lsn:
            return r
    return None


def step_reply(run: Run, result: StepResult, begun_task: str | None) -> Reply:
    """``begun_task``: the task of the run this call began, None if it existed."""
    records = _recent(run, result.lsn)
    intent = next((r for r in records if isinstance(r, Intent) and r.lsn == result.lsn), None)
    close = _closing(records, result.lsn)
    verified = close.verified if isinstance(close, Commit) else ""
    data: dict[str, Any] = {
        "run": run.id, "lsn": result.lsn, "commit_lsn": None if close is None else close.lsn,
        "tool": result.tool, "target": list(result.target), "status": result.status,
        "post": list(result.post), "verified": verified,
        "step": None if intent is None else intent.step, "began_run": begun_task is not None,
    }
    targets = " -> ".join(result.target)
    text = f"LSN {result.lsn} {result.tool} {targets}: {result.status} (verified: {verified})"
    if intent is not None and result.tool == "exec":
        theirs = {t[0] for t in close.theirs} if isinstance(close, Commit) else set()
        changed = [p for p in run.wt.changed_paths(TreeId(intent.pre[0]),
                                                   TreeId(result.post[0]))
                   if p not in theirs]  # other runs' work is not this step's
        data["changed"] = list(changed)
        text += f"; changed: {', '.join(changed) if changed else 'nothing'}"
    elif intent is not None:
        data["pre"] = list(intent.pre)
        data["changed"] = [p for p, a, b in zip(intent.target, intent.pre, result.post,
                                                 strict=True) if a != b]
        if not data["changed"]:
            text += "; no change: already in that state"
    if begun_task is not None:
        text = f"began run {run.id} (task: {begun_task})\n" + text
    return Reply(True, text, data)


def with_output(reply: Reply, output: str) -> Reply:
    if not output:
        return reply
    text = reply.text + f"\n--- output (last {OUTPUT_TAIL} characters) ---\n{output}"
    return Reply(reply.ok, text, {**reply.data, "output": output})


def failure_data(state: dict[str, Any], error: WalError) -> dict[str, Any]:
    """Facts a refused or aborted step adds to its error: the run, the abort
    record (a step that failed verification is closed by one), the output."""
    data: dict[str, Any] = {}
    run: Run | None = state.get("run")
    out: Captured | None = state.get("out")
    if out is not None and out.text:
        data["output"] = out.text
    if run is None:
        return data
    data["run"] = run.id
    if not isinstance(error, StepFailed):
        return data  # refused before anything was logged
    with contextlib.suppress(WalError, pygit2.GitError, OSError):
        newest = run.recent()
        last = newest[-1] if newest else None
        if isinstance(last, Abort):
            data["aborted"] = {"intent": last.intent, "lsn": last.lsn, "reason": last.reason,
                               "restored": list(last.restored), "output": last.output}
    return data
