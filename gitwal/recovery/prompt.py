"""The resume prompt: facts from a recovery report, rendered for a model.

Nothing here reads the repository; every sentence comes from the report, so
the prompt is exactly as trustworthy as the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.display import safe
from ..base.ids import ABSENT, UNKNOWN
from ..records.model import agent_tool
from .redo import quote, redo_command

if TYPE_CHECKING:
    from .report import Outcome, Report

AWAITING_APPROVAL = "awaiting-approval"  # report.AWAITING_APPROVAL (not imported: load cost)


def text(value: object) -> str:
    """A string from the log as prompt text: one line, no control characters."""
    return safe(str(value))



def _command(args: dict[str, Any]) -> str:
    argv = args.get("argv", [])
    return text(str(argv[-1] if argv else "")[:120])


def _paths(paths: Any) -> str:
    return ", ".join(text(p) for p in paths)


def describe(tool: str, args: dict[str, Any], target: tuple[str, ...]) -> str:
    """A one-line description of a step; every string from the log is escaped."""
    if (own := agent_tool(args)) is not None:
        if tool == "exec":
            return f"{text(own)}: {_command(args)}"
        return f"{text(own)} {_paths(target)}"
    if tool == "replace_symbol" and "old" in args:
        return (f"replace_symbol {text(target[0])}: {text(args['old'])} -> "
                f"{text(args['new'])}")
    if tool == "exec":
        return "exec " + " ".join(quote(str(a)) for a in args.get("argv", []))
    if tool in ("undo", "redo"):
        lsns = args.get("undoes") if tool == "undo" else [args.get("redoes")]
        of = ", ".join(text(str(n)) for n in lsns or [])
        return f"{tool} of LSN {of}: {_paths(target)}"
    return f"{text(tool)} {' -> '.join(text(t) for t in target)}"


def redo_agent(o: Outcome) -> str:
    """How an agent redoes its own step that did not land: with its own tool.

    A ``git wal`` command run through the agent's shell tool would fail: that
    call's hook opens an intent of its own on the same run first.
    """
    own = text(agent_tool(o.args) or o.tool)
    what = f"LSN {o.lsn} ({describe(o.tool, o.args, o.target)})"
    if o.tool == "exec":
        how = ("was undone by `git wal recover --restore`" if o.action == "restored"
               else "did not run")
        return (f"{what} {how}: run that command again with your {own} tool if it is "
                "still needed")
    shown = [f"`git cat-file blob {quote(c)}` shows {text(p)}" for p, c in _posts(o)
             if c not in (ABSENT, UNKNOWN)]
    return (f"{what} did not land: make that change again with your {own} tool"
            + (f" (the intended result: {'; '.join(shown)})" if shown else ""))


def _posts(o: Outcome) -> list[tuple[str, str]]:
    if o.tool == "write_file":
        return [(str(o.args.get("path")), str(o.args.get("content")))]
    return [(str(p), str(c)) for p, c in zip(o.args.get("paths", []),
                                             o.args.get("contents", []), strict=False)]


def _decide_agent(report: Report, o: Outcome) -> str:
    """The Action for an agent's shell call in doubt, followable from inside the session."""
    return (f"Action: decide LSN {o.lsn} ({describe(o.tool, o.args, o.target)}) before "
            "anything else: it was interrupted after it changed the paths above, and "
            "whether it finished is unknown. Check them. To keep them, go on: your next "
            "tool call records them as found (then run the command again only if it had "
            "not finished). To put them back as they were before the call, ask the user to "
            f"run `git wal recover --run {report.run} --restore` in a terminal (not with "
            "your own shell tool: that call would record this step as found first).")


def render(report: Report) -> str:
    plan = report.plan
    where = f"base {text(plan.base[:12])}" + (
        f" on branch {text(plan.branch)}" if plan.branch else "")
    lines = [f"Task: {text(plan.task or '(no task text)')} (run {text(report.run)}, plan LSN 1, "
             f"{where})."]
    cp = report.checkpoint
    if cp:
        lines.append(f"Checkpoint: LSN {cp.lsn}, commit {text(cp.git[:12])} ({text(cp.ref)}) "
                     "holds every "
                     f"step through LSN {cp.covers}.")
    if (last := report.last_step) is not None:
        lines.append(
            f"Committed: {report.committed_total} step(s), the last at LSN {last.lsn} "
            f"({describe(last.tool, last.args, last.target)}). "
            "Those are done and verified: do not redo them."
        )
    elif not cp or not cp.committed:
        lines.append("Committed: no step yet.")
    for dec in report.decided:
        lines.append(f"LSN {dec.lsn} ({describe(dec.tool, dec.args, dec.target)}) was decided "
                     f"{'applied' if dec.applied else 'not applied'} by a person, "
                     f"{text(dec.decided_by)}" + (f": {text(dec.note)}" if dec.note else "")
                     + (" (as found: do not redo it)." if dec.applied else "."))
    redo: list[Outcome] = []
    for o in report.outcomes:
        lines.append(f"LSN {o.lsn} ({describe(o.tool, o.args, o.target)}) was intended, "
                     f"not committed. Found: {text(o.detail)}.")
        if o.open and o.outcome != AWAITING_APPROVAL:
            lines.append("  Changed paths: " + _paths(o.changed[:20])
                         + (f" and {len(o.changed) - 20} more" if len(o.changed) > 20 else ""))
        elif o.outcome == "superseded":
            # Another run's committed change holds the path now: redoing this
            # step would overwrite it.
            lines.append("  Another run changed its target since: read it again before "
                         "deciding whether this step is still needed.")
        elif o.action in ("aborted", "restored"):
            redo.append(o)  # not applied, or undone: the step has still to be done
        for path, _oid, command in o.saved:
            lines.append(f"  Saved before it was overwritten: {text(path)}; `{text(command)}` "
                         "brings it back.")
    if not report.outcomes:
        for o in report.undone:
            lines.append(f"LSN {o.lsn} ({describe(o.tool, o.args, o.target)}) was not "
                         f"committed: an earlier recovery closed it ({text(o.detail)}); it "
                         "still has to be done.")
            redo.append(o)
    for d in report.drift:
        lines.append(f"Drift: {text(d.path)} changed after LSN {d.lsn} committed it "
                     f"(expected {text(d.expected[:12])}, found {text(d.actual[:12])}); left "
                     "as it is.")
    if report.elsewhere:
        shown = [f"{text(c.path)} (run {text(c.run)} LSN {c.lsn}"
                 + (f", task '{text(c.task)}')" if c.task else ")")
                 for c in report.elsewhere[:20]]
        more = len(report.elsewhere) - len(shown)
        lines.append("Changed by other runs since this run's last committed step (read "
                     "them again before you go on): " + ", ".join(shown)
                     + (f" and {more} more" if more > 0 else "") + ".")
    if report.cleared_lock:
        lines.append("A stale ref lock from the interrupted process was cleared.")
    rest = report.remaining_steps()
    if any(o.action == "none" for o in report.outcomes):
        action = (f"Action: run `git wal recover --run {report.run}` first; it decides the "
                  "open intent above and repairs the tree.")
    elif report.in_doubt:
        o = next(o for o in report.outcomes if o.open)
        if o.outcome == AWAITING_APPROVAL and "approved by" not in o.detail:
            action = (f"Action: LSN {o.lsn} ({describe(o.tool, o.args, o.target)}) is "
                      "irreversible and waits for a person's approval: ask the user to run "
                      f"`git wal approve {o.lsn}` (or `git wal resolve {o.lsn} --not-applied` "
                      "to drop it); do not run it any other way.")
        elif o.outcome == AWAITING_APPROVAL:
            action = (f"Action: LSN {o.lsn} is approved and has not run: run it once, with "
                      f"`git wal recover --run {report.run} --redo` (or the same command "
                      "again); do not run it any other way.")
        elif agent_tool(o.args) is not None:
            action = _decide_agent(report, o)
        else:
            action = (f"Action: decide LSN {o.lsn} before anything else. Inspect the changed "
                      "paths (they may hold someone's work); `git wal recover --run "
                      f"{report.run} --restore` saves what they hold in the log, then puts "
                      "them back as they were before the step, after which the step can be "
                      "run again.")
    elif redo:
        action = "Action: " + "; then ".join(
            redo_agent(o) if agent_tool(o.args) is not None else
            f"redo LSN {o.lsn} with `{redo_command(o.tool, o.args, o.step, report.run)}`"
            for o in redo
        )
        if len(rest) > len(redo):
            nxt = rest[len(redo)]
            action += f"; then continue with plan step {nxt[0]}: {text(nxt[1])}"
        elif any(agent_tool(o.args) is not None for o in redo):
            action += "; then continue the task"
        action += "."
    elif rest:
        action = f"Action: continue with plan step {rest[0][0]}: {text(rest[0][1])}."
    elif report.last_agent_step is not None and (done := report.last_step) is not None:
        # No plan steps to name the next point: name the last step done, from the
        # log: the one the "Committed:" line names (a redo's own step, when it is
        # newer than the agent's last call).
        action = (f"Action: continue the task from the step after LSN {done.lsn} "
                  f"({describe(done.tool, done.args, done.target)}), the last one committed "
                  f"(do not redo it); the next record will be LSN {report.next_lsn}.")
    else:
        action = f"Action: continue the task; the next record will be LSN {report.next_lsn}."
    lines.append(action)
    if rest:
        lines.append("Remaining plan steps: " + "; ".join(f"{i}. {text(s)}"
                                                          for i, s in rest[:50])
                     + (f" (and {len(rest) - 50} more)" if len(rest) > 50 else ""))
    return "\n".join(lines)
