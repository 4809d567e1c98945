"""The text a SessionStart hook gives the model: facts from the log, nothing else."""

from __future__ import annotations

from ..records.model import Commit, Intent, Record, Unlogged, agent_tag, is_miss
from ..recovery.prompt import render
from ..recovery.report import Report
from ..run import Run
from ..wal import Wal

LIMIT = 9000  # agents cap injected context (Claude Code: 10,000 characters)
RECENT = 15  # committed steps listed after a compaction


def _step(intent: Intent) -> str:
    tag = agent_tag(intent)
    tool = f"{tag.get('tool')}" if tag else intent.tool
    if intent.tool == "exec":
        argv = intent.args.get("argv", [])
        return f"{tool}: {(argv[-1] if argv else '')[:120]}"
    return f"{tool} {' '.join(intent.target)}"


def recent_steps(records: list[Record], n: int = RECENT) -> list[str]:
    intents = {r.lsn: r for r in records if isinstance(r, Intent)}
    out: list[str] = []
    for r in records:
        if isinstance(r, Commit) and (i := intents.get(r.intent)) is not None:
            miss = " (recorded as observed: prediction miss)" if is_miss(i, r) else ""
            out.append(f"LSN {i.lsn} {_step(i)}{miss}")
        elif isinstance(r, Unlogged):
            out.append(f"LSN {r.lsn} changed without an intent: {' '.join(r.paths[:10])}"
                       + (" ..." if len(r.paths) > 10 else ""))
    return out[-n:]


def resume_context(wal: Wal, run: Run, source: str, fresh: bool, notes: list[str],
                   others: list[str], report: Report | None = None) -> str:
    """What the model is told: the run, the resume prompt (``report``: the one the
    hook's recovery produced, else a read-only one), and after a compaction
    the most recent steps."""
    lines = [f"gitwal: the file changes of this session are logged as run {run.id} "
             f"(`git wal status --run {run.id}`, `git wal log --run {run.id}`)."]
    if not fresh:
        lines.append(render(report or wal.report(run.id)))
        if source == "compact":
            steps = recent_steps(run.since_checkpoint())
            if steps:
                lines.append("Most recent logged steps, oldest first:")
                lines += [f"- {s}" for s in steps]
    lines += [f"Note: {n}" for n in notes]
    for rid in others:
        lines.append(f"Note: run {rid} (another session in this worktree) has an open intent; "
                     f"`git wal recover --run {rid}` decides it.")
    text = "\n".join(lines)
    return text if len(text) <= LIMIT else text[: LIMIT - 20] + "\n[... truncated]"
