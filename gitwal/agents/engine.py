"""What every agent's hooks do, whatever the agent: the policy layer.

An adapter (claude.py, codex.py, gemini.py) turns a payload into one
:class:`Action` (actions.py); :func:`perform` carries it out against the run
of the agent's session (session.py) and returns a :class:`Reply`, which the
adapter renders in its agent's protocol (exit codes, JSON).

Policy (docs/agents.md):

* fail closed: a call whose intent cannot be made durable is refused, with a
  reason the model can act on; ``git config wal.agent.failOpen true`` lets it
  through with a warning instead (the next hook records what it changed);
* one run per agent session, its id derived from the session id, so a
  resumed session continues its run;
* paths outside the working tree (or inside ``.git``) are not gitwal's
  business: the call is allowed and nothing is logged.
"""

from __future__ import annotations

from dataclasses import replace

import pygit2

from ..base.errors import RunBusy, UnknownRun, WalError
from ..base.ids import RunId
from ..checkpoints import checkpoint as cp
from ..records.model import Checkpoint, Commit, Intent, Record, Unlogged, agent_tag
from ..run import Run
from ..together.pathlocks import PathBusy
from ..wal import Wal
from . import approvals, done, refusals, turns
from .actions import (
    Action,
    Close,
    FileStep,
    Ignore,
    PreCompact,
    Reply,
    SessionStart,
    ShellStep,
    TurnStart,
)
from .config import Config
from .context import resume_context
from .external import External
from .session import Session


def perform(session: Session, action: Action, event: str) -> Reply:
    """Carry out ``action``; every failure is turned into the policy's reply."""
    try:
        return _perform(session, action, event)
    except PathBusy as e:
        return busy_block(e)
    except (WalError, OSError, pygit2.GitError) as e:
        message = e.message if isinstance(e, WalError) else str(e) or type(e).__name__
        hint = e.hint if isinstance(e, WalError) else ""
        return failure(session.config, action, message, hint)


def busy_block(e: PathBusy) -> Reply:
    """Another run is changing a path of this call: refused even with
    wal.agent.failOpen (running it would be a lost update), in words the
    model can act on."""
    return Reply(block=f"gitwal: {e.message}, so this call was refused (nothing was changed): "
                       f"{e.hint}.")


def failure(config: Config, action: Action, message: str, hint: str) -> Reply:
    """The reply when gitwal itself failed while handling ``action``."""
    text = f"gitwal: {message}" + (f" ({hint})" if hint else "")
    if isinstance(action, (FileStep, ShellStep)):
        if config.fail_open:
            return Reply(warning=f"{text}; the call runs unlogged (wal.agent.failOpen)")
        return Reply(block=(
            f"{text}. The {action.call.tool} call was refused because its intent could not "
            "be made durable in the write-ahead log (nothing was changed). Tell the user; "
            "they can fix the cause (`git wal status` shows the log) or allow unlogged calls "
            "with `git config wal.agent.failOpen true`."))
    if isinstance(action, PreCompact) and action.trigger == "manual" and not config.fail_open:
        return Reply(block=f"{text}; compacting now could lose what the log has not secured. "
                           "Fix the cause, then compact again.")
    if config.fail_open or isinstance(action, (SessionStart, PreCompact)):
        return Reply(warning=text)
    return Reply(error=text)


def _perform(session: Session, action: Action, event: str) -> Reply:
    if isinstance(action, Ignore):
        return Reply()
    if isinstance(action, SessionStart):
        return _session_start(session, action)
    if isinstance(action, TurnStart):
        turns.start(session.wal.repo, session.run_id)
        return Reply()
    if isinstance(action, (FileStep, ShellStep)) and action.call.turn is None:
        # The turn the agent's payload does not name: the one its last prompt began.
        turn = turns.current(session.wal.repo, session.run_id)
        action = replace(action, call=replace(action.call, turn=turn))
    if isinstance(action, FileStep):
        if why := refusals.file_refusal(session.wal.repo, session.cwd, action.paths):
            return Reply(block=why)
        rel = [session.tree_path(p) for p in action.paths]
        if any(r is None for r in rel):
            return Reply()  # outside the working tree: not ours to log
        paths = [r for r in rel if r is not None]
        run = session.run()
        out = session.external(run).intend_files(
            action.call, paths, action.compute(paths), event, session.config.open_wait)
        return Reply(outcome=out)
    if isinstance(action, ShellStep):
        aliases = session.config.alias_map
        if why := refusals.shell_refusal(action.command, aliases):
            return Reply(block=why)
        irreversible = approvals.matches(action.command, session.config.irreversible, aliases)
        if irreversible and session.agent not in approvals.ASKING_AGENTS:
            return Reply(block=approvals.cannot_ask(session.agent, action.command,
                                                    irreversible))
        run = session.run()
        cwd = session.tree_dir(action.directory)
        out = session.external(run, shell=True).intend_exec(
            action.call, ["bash", "-c", action.command], cwd, event,
            session.config.open_wait, irreversible=irreversible is not None)
        if irreversible and out.intent is not None:
            return Reply(ask=approvals.ask_reason(out.intent, irreversible), outcome=out)
        return Reply(outcome=out)
    if isinstance(action, Close):
        # Begun if need be: a call whose PreToolUse failed open still gets recorded.
        run = session.run()
        rel = [session.tree_path(p) for p in action.paths]
        paths = [r for r in rel if r is not None]
        if action.paths and not paths:
            return Reply()
        ext = session.external(run, shell=not action.paths)
        return Reply(outcome=ext.close(action.call, event, paths, action.error,
                                       action.outcome))
    if not session.exists():
        return Reply()  # no run yet: nothing of this session to secure
    run = session.wal.run(session.run_id)
    if isinstance(action, PreCompact):
        return _pre_compact(session, run, action)
    # TurnEnd: the turn is over, so compare the whole tree whatever its size (unless
    # this is only a pause between two model requests: whole_tree False).
    ext = session.external(run, shell=action.whole_tree)
    out = ext.settle(event, session.config.open_wait, keep_in_doubt=True)
    if not action.gate:
        return Reply(outcome=out)
    found = done.verdict(run, ext, done.DoneConfig.of(session.wal.repo), action.continuing,
                         action.thread)
    return Reply(block=found.block, warning=found.note, outcome=out)


def _session_start(session: Session, action: SessionStart) -> Reply:
    fresh = not session.exists()
    run = session.run()
    notes: list[str] = []
    report = None
    if not fresh and action.source in ("startup", "resume", "fork"):
        # The agent is not running a tool now: what is open was interrupted.
        try:
            report = session.wal.recover(run.id, redo=session.config.redo)
        except RunBusy as e:
            notes.append(f"gitwal could not recover run {run.id} now: {e.message}")
        else:
            notes += [f"LSN {o.lsn} is in doubt: it stays open until it is decided (see "
                      "Action), and `/compact` is refused until then"
                      for o in report.outcomes if o.open]
    # Record what differs from the log, but settle nothing: an intent still open
    # here is one recovery could not decide (in doubt, or a live process held the
    # run), and only a decision, or the session's next tool call, may close it
    # (docs/agents.md). Nothing is appended behind an open intent.
    External(run, full_check=True).check(f"SessionStart {action.source} check")
    others = _other_open_runs(session.wal, run.id)
    return Reply(context=resume_context(session.wal, run, action.source, fresh, notes, others,
                                        report))


def _other_open_runs(wal: Wal, rid: RunId) -> list[str]:
    """Other runs of this worktree's current run whose newest record is an intent."""
    try:
        current = wal.current()
    except UnknownRun:
        return []
    if current == rid:
        return []
    newest = wal.run(current, read_only=True).recent()
    return [current] if newest and isinstance(newest[-1], Intent) else []


def _pending(records: list[Record]) -> bool:
    """Anything since the newest checkpoint that a checkpoint would secure."""
    return any(isinstance(r, (Commit, Unlogged)) for r in records)


def _pre_compact(session: Session, run: Run, action: PreCompact) -> Reply:
    # The last call's closing hook may still be on its way (it runs in the
    # background): an intent it is about to close is not a reason to refuse.
    session.external(run).await_closing(session.config.open_wait)
    records = run.since_checkpoint()
    last = records[-1]
    if isinstance(last, Intent) and action.trigger == "manual":
        return Reply(block=_open_intent_block(run, last))
    # trigger auto: refusing would fail the request that needed the room, so
    # settle what is open and secure the rest instead (docs/agents.md).
    session.external(run).settle(f"PreCompact {action.trigger}", session.config.open_wait)
    records = run.since_checkpoint()
    if not _pending(records):
        return Reply()
    try:
        result = cp.checkpoint(run, detached=session.config.detached, include_unlogged=True)
    except WalError as e:
        reason = (f"gitwal could not checkpoint run {run.id} before compacting: {e.message}"
                  + (f" ({e.hint})" if e.hint else ""))
        if action.trigger == "manual" or session.config.block_auto_compact:
            return Reply(block=reason + f". Run `git wal checkpoint --run {run.id}` once the "
                         "cause is fixed, then compact again.")
        return Reply(warning=reason + "; compacting anyway (the log itself is durable).")
    first = records[0]
    since = f" (after LSN {first.lsn})" if isinstance(first, Checkpoint) else ""
    return Reply(warning=f"gitwal: checkpointed run {run.id} at LSN {result.lsn}{since}: "
                         f"{result.git[:12]} on {result.ref}")


def _open_intent_block(run: Run, intent: Intent) -> str:
    """Why a manual compaction is refused, and the exact next step."""
    tag = agent_tag(intent)
    what = f"{tag.get('tool')}" if tag else intent.tool
    if intent.tool == "exec":
        argv = intent.args.get("argv", [])
        what += f": {(argv[-1] if argv else '')[:80]}"
        step = (f"Run `git wal recover --run {run.id} --restore`: it puts back any path the "
                "interrupted command changed and closes the step (`git wal recover --run "
                f"{run.id}` only lists them; to keep them instead, go on with the session: "
                "its next tool call records them as found)")
    else:
        what += " " + " ".join(intent.target)
        step = (f"Run `git wal recover --run {run.id}`: it decides the step from the tree "
                "(committed if it landed, otherwise aborted; a half-written file is put "
                "back to its pre-image)")
    return (f"gitwal: intent LSN {intent.lsn} ({what}) of run {run.id} is open, so "
            f"compacting could lose the only account of it. {step}; then compact again.")
