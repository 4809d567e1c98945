"""The closing check of `git wal verify`: every commit or abort closes an
earlier, open intent, once; at most one intent is open, and only as the newest
record (an approval of it may follow).

Records only: no object is read.
"""

from __future__ import annotations

from ..log.segments import Entry, Failure
from ..records.model import (
    Abort,
    Approval,
    Checkpoint,
    Claim,
    Commit,
    Intent,
    Plan,
    Takeover,
    type_name,
)


def closing_failures(run: str, history: list[Entry]) -> list[Failure]:
    """Intents close at most once, by a later record; one open intent, the newest."""
    out: list[Failure] = []
    by_lsn = {e.record.lsn: e.record for e in history}
    closed: dict[int, int] = {}
    approved: dict[int, int] = {}  # intent -> its approval
    open_: Intent | None = None

    def fail(reason: str, lsn: int) -> None:
        out.append(Failure(run, "closing", reason, lsn))

    for e in history:
        r = e.record
        if isinstance(r, Plan) and r.lsn != 1:
            fail(f"a plan record at LSN {r.lsn} (the plan is LSN 1 only)", r.lsn)
        elif isinstance(r, Intent):
            if open_ is not None:
                fail(f"intent LSN {r.lsn} begins while intent LSN {open_.lsn} is still open "
                     "(at most one intent may be open)", r.lsn)
            open_ = r
        elif isinstance(r, (Checkpoint, Claim, Takeover)) and open_ is not None:
            fail(f"{type_name(r)} written while intent LSN {open_.lsn} is open", r.lsn)
        elif isinstance(r, Approval):
            # The one record that may follow an open intent: an approval of it.
            if open_ is None or open_.lsn != r.intent or open_.args.get("irreversible") is not True:
                fail(f"approval of LSN {r.intent}, which is not the open irreversible intent",
                     r.lsn)
            else:
                # Approved again is allowed: an approval another clone wrote is
                # data here (trust/authority.py), so this clone approves anew.
                approved.setdefault(r.intent, r.lsn)
        elif isinstance(r, (Commit, Abort)):
            kind = type_name(r)
            target = by_lsn.get(r.intent)
            if r.intent >= r.lsn:
                fail(f"{kind} closes LSN {r.intent}, which is not an earlier record", r.lsn)
            elif not isinstance(target, Intent):
                what = ("is not in the log" if target is None
                        else f"is a {type_name(target)} record, not an intent")
                fail(f"{kind} closes LSN {r.intent}, which {what}", r.lsn)
            elif r.intent in closed:
                fail(f"{kind} closes intent LSN {r.intent}, already closed by LSN "
                     f"{closed[r.intent]}", r.lsn)
            else:
                closed[r.intent] = r.lsn
                if open_ is not None and open_.lsn == r.intent:
                    open_ = None
    trailing = [e.record for e in history if e.record.lsn > (open_.lsn if open_ else 0)]
    if open_ is not None and not all(isinstance(r, Approval) for r in trailing):
        fail(f"intent LSN {open_.lsn} ({open_.tool} {' '.join(open_.target)}) is never "
             "closed, yet records follow it (an open intent must be the newest record)",
             open_.lsn)
    return out
