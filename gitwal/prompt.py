"""The resume prompt: facts from a recovery report, rendered for a model.

Nothing here reads the repository; every sentence comes from the report, so
the prompt is exactly as trustworthy as the log.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import Intent
    from .recovery import Outcome, Report


def redo_command(tool: str, args: dict[str, Any], step: int | None = None) -> str:
    """The `git wal` command line that performs the step again."""
    q = shlex.quote
    opt = f" --step {step}" if step is not None else ""
    if tool == "exec":
        return f"git wal exec{opt} -- " + " ".join(q(a) for a in args.get("argv", []))
    apply = f"git wal apply{opt}"
    if tool == "write_file":
        return (f"git cat-file blob {args['content']} | "
                f"{apply} write-file {q(args['path'])} --from -")
    if tool == "replace_symbol":
        return f"{apply} replace-symbol {q(args['path'])} {q(args['old'])} {q(args['new'])}"
    if tool == "replace_text":
        return (f"{apply} replace-text {q(args['path'])} --old {q(args['old'])} "
                f"--new {q(args['new'])}")
    if tool == "ensure_line":
        return f"{apply} ensure-line {q(args['path'])} {q(args['line'])}"
    if tool == "delete_file":
        return f"{apply} delete-file {q(args['path'])}"
    if tool == "move_file":
        return f"{apply} move-file {q(args['src'])} {q(args['dst'])}"
    if tool == "write_files":  # an agent's multi-file call: one command per path
        return " && ".join(
            f"{apply} delete-file {q(path)}" if content == "absent" else
            f"git cat-file blob {content} | {apply} write-file {q(path)} --from -"
            for path, content in zip(args.get("paths", []), args.get("contents", []),
                                     strict=False))
    return f"{tool} {args}"


AGENT_ARG = "agent"  # agent_call.AGENT_ARG (not imported: it would load pygit2)


def agent_tool(args: dict[str, Any]) -> str | None:
    """The agent's own tool name (``Edit``, ``Bash``, ...) of an agent's intent."""
    tag = args.get(AGENT_ARG)
    tool = tag.get("tool") if isinstance(tag, dict) else None
    return tool if isinstance(tool, str) and tool else None


def _command(args: dict[str, Any]) -> str:
    argv = args.get("argv", [])
    return str(argv[-1] if argv else "")[:120]


def describe(tool: str, args: dict[str, Any], target: tuple[str, ...]) -> str:
    if (own := agent_tool(args)) is not None:
        if tool == "exec":
            return f"{own}: {_command(args)}"
        return f"{own} {', '.join(target)}"
    if tool == "replace_symbol" and "old" in args:
        return f"replace_symbol {target[0]}: {args['old']} -> {args['new']}"
    if tool == "exec":
        return "exec " + " ".join(shlex.quote(a) for a in args.get("argv", []))
    return f"{tool} {' -> '.join(target)}"


def remaining_steps(report: Report) -> list[tuple[int, str]]:
    """Plan steps that no committed intent has carried out.

    Intents name their plan step (``step``); a run whose intents never do is
    read as "the n-th committed intent carries out plan step n".
    """
    steps = list(enumerate(report.plan.steps, start=1))
    cp = report.checkpoint
    done = set(cp.done_steps if cp else ()) | {i.step for i in report.committed} - {None}
    if done:
        return [(n, s) for n, s in steps if n not in done]
    return steps[report.committed_total :]


def redo_agent(o: Outcome) -> str:
    """How an agent redoes its own step that did not land: with its own tool.

    A ``git wal`` command run through the agent's shell tool would fail: that
    call's hook opens an intent of its own on the same run first.
    """
    own = agent_tool(o.args) or o.tool
    what = f"LSN {o.lsn} ({describe(o.tool, o.args, o.target)})"
    if o.tool == "exec":
        return (f"{what} did not run: run that command again with your {own} tool if it is "
                "still needed")
    shown = [f"`git cat-file blob {c}` shows {p}" for p, c in _posts(o) if c != "absent"]
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
    where = f"base {plan.base[:12]}" + (f" on branch {plan.branch}" if plan.branch else "")
    lines = [f"Task: {plan.task or '(no task text)'} (run {report.run}, plan LSN 1, {where})."]
    cp = report.checkpoint
    if cp:
        lines.append(f"Checkpoint: LSN {cp.lsn}, commit {cp.git[:12]} ({cp.ref}) holds every "
                     f"step through LSN {cp.covers}.")
    if report.committed:
        last = report.committed[-1]
        lines.append(
            f"Committed: {report.committed_total} step(s), the last at LSN {last.lsn} "
            f"({describe(last.tool, last.args, last.target)}). "
            "Those are done and verified: do not redo them."
        )
    elif not cp or not cp.committed:
        lines.append("Committed: no step yet.")
    redo: list[Outcome] = []
    for o in report.outcomes:
        lines.append(f"LSN {o.lsn} ({describe(o.tool, o.args, o.target)}) was intended, "
                     f"not committed. Found: {o.detail}.")
        if o.open:
            lines.append("  Changed paths: " + ", ".join(o.changed[:20])
                         + (f" and {len(o.changed) - 20} more" if len(o.changed) > 20 else ""))
        elif o.action == "aborted":
            redo.append(o)
    for d in report.drift:
        lines.append(f"Drift: {d.path} changed after LSN {d.lsn} committed it "
                     f"(expected {d.expected[:12]}, found {d.actual[:12]}); left as it is.")
    if report.cleared_lock:
        lines.append("A stale ref lock from the interrupted process was cleared.")
    rest = remaining_steps(report)
    if any(o.action == "none" for o in report.outcomes):
        action = (f"Action: run `git wal recover --run {report.run}` first; it decides the "
                  "open intent above and repairs the tree.")
    elif report.in_doubt:
        o = next(o for o in report.outcomes if o.open)
        if agent_tool(o.args) is not None:
            action = _decide_agent(report, o)
        else:
            action = (f"Action: decide LSN {o.lsn} before anything else. Inspect the changed "
                      f"paths; `git wal recover --run {report.run} --restore` puts them back "
                      "to the pre tree, after which the step can be run again.")
    elif redo:
        action = "Action: " + "; then ".join(
            redo_agent(o) if agent_tool(o.args) is not None else
            f"redo LSN {o.lsn} with `{redo_command(o.tool, o.args, o.step)}`" for o in redo
        )
        if len(rest) > len(redo):
            nxt = rest[len(redo)]
            action += f"; then continue with plan step {nxt[0]}: {nxt[1]}"
        elif any(agent_tool(o.args) is not None for o in redo):
            action += "; then continue the task"
        action += "."
    elif rest:
        action = f"Action: continue with plan step {rest[0][0]}: {rest[0][1]}."
    elif (done := _last_agent_step(report)) is not None:
        # No plan steps to name the next point: name the last step done, from the log.
        action = (f"Action: continue the task from the step after LSN {done.lsn} "
                  f"({describe(done.tool, done.args, done.target)}), the last one committed "
                  f"(do not redo it); the next record will be LSN {report.next_lsn}.")
    else:
        action = f"Action: continue the task; the next record will be LSN {report.next_lsn}."
    lines.append(action)
    if rest:
        lines.append("Remaining plan steps: " + "; ".join(f"{i}. {s}" for i, s in rest[:50])
                     + (f" (and {len(rest) - 50} more)" if len(rest) > 50 else ""))
    return "\n".join(lines)


def _last_agent_step(report: Report) -> Intent | None:
    for intent in reversed(report.committed):
        if agent_tool(intent.args) is not None:
            return intent
    return None
