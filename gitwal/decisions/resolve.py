"""A person's decision on an open step: ``git wal resolve LSN --applied|--not-applied``.

Recovery decides an open intent from hashes. When the tree cannot tell (a
shell step that changed files, bytes nobody predicted), the step stays open,
in doubt, and the resume prompt asks. Before this, the only way out was
``recover --restore``, which throws the step's effects away. A person who
knows what happened closes the step here, with a record that says who
decided and why (``decided_by``, ``note``: docs/format.md; signed like every
append when signing is configured):

* applied: a commit whose post is what the tree holds now (a file tool:
  each target's state, its bytes kept in the object database; a shell step:
  a snapshot tree). The effects are accepted as they are.
* not applied: an abort. Nothing is written to the tree (bytes gitwal did
  not write are never overwritten): what the step may have left is found
  later as drift, and the step is the resume point's to redo.

Refused, with nothing appended: an LSN that is not an open intent of the
run; a shell step whose command is still running; a call from inside an
agent's tool call (the decision is a person's, not the model's).

A person's decision (here and `git wal approve`) is confirmed on the
controlling terminal: :func:`a_person` shows the step (LSN, tool, command)
on ``/dev/tty`` and reads the answer there, not from stdin, so a program
that runs the command with its output and input in pipes (an agent's shell
tool) cannot answer. A process with no controlling terminal is refused
unless ``yes`` (``--yes``: a person decided, in a script of their own).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

import pygit2

from ..base.display import safe
from ..base.errors import RunBusy, WalError
from ..base.ids import ABSENT, Lsn
from ..log.store import Ref
from ..records.model import Abort, Commit, Intent, agent_tag, calling_agent
from ..recovery.scan import Scan
from ..run import Run
from ..worktree.overwrite import DIRECTORY, SPECIAL, found, save

__all__ = ["Decision", "a_person", "decider", "describe", "resolve"]

TTY = "/dev/tty"
ANSWER_LIMIT = 256  # bytes of an answer read from the terminal


@dataclass(frozen=True)
class Decision:
    """What ``resolve`` appended."""

    run: str
    lsn: Lsn  # the decided intent
    record: Lsn  # the commit or abort that closes it
    applied: bool
    decided_by: str
    note: str
    tool: str
    target: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "lsn": self.lsn, "record": self.record,
                "decision": "applied" if self.applied else "not-applied",
                "decided_by": self.decided_by, "note": self.note, "tool": self.tool,
                "target": list(self.target)}


def decider(repo: pygit2.Repository) -> str:
    """Who decides: git's identity (user.name, user.email), else the login name."""
    try:
        sig = repo.default_signature
        return f"{sig.name} <{sig.email}>"
    except (KeyError, pygit2.GitError):
        return os.environ.get("USER") or os.environ.get("LOGNAME") or f"uid {os.getuid()}"


def a_person(repo: pygit2.Repository, command: str, what: str,
             hint: str = "ask the user to run it in a terminal", step: str = "",
             yes: bool = False) -> str:
    """Who decides (:func:`decider`); refused inside an agent's tool call, since
    `git wal COMMAND` records a person's ``what``, not the model's; confirmed
    on the controlling terminal (``step`` shown) unless ``yes``."""
    if (agent := calling_agent(os.environ)) is not None:
        raise WalError(f"`git wal {command}` records a person's {what}; this runs inside a "
                       f"{agent} tool call", hint)
    if not yes:
        confirm(f"{step}\n{command.capitalize()} it?" if step else f"{command}?", command, what)
    return decider(repo)


def confirm(question: str, command: str, what: str) -> None:
    """Ask ``question`` on the controlling terminal; refused unless the answer is yes."""
    try:
        fd = os.open(TTY, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise WalError(f"`git wal {command}` records a person's {what} and asks for it on the "
                       "terminal, but this process has no controlling terminal",
                       "run it in a terminal, or, if you are a person who decided, add "
                       "--yes (never from an agent's tool call)") from None
    with os.fdopen(fd, "r+b", buffering=0) as tty:
        tty.write(question.encode("utf-8", "replace") + b" [y/N] ")
        answer = b""
        while len(answer) < ANSWER_LIMIT and not answer.endswith(b"\n"):
            chunk = tty.read(1)
            if not chunk:
                break
            answer += chunk
    text = answer.decode("utf-8", "replace").strip()
    if text.lower() not in ("y", "yes"):
        raise WalError(f"`git wal {command}`: not confirmed on the terminal (answer "
                       f"{safe(text)!r}); nothing was recorded",
                       f"run it again and answer y to record the {what}")


def describe(run: Run, lsn: int, waiting: bool = False) -> str:
    """The step a person is asked about: LSN, tool (the agent's, if any), command or
    paths. Refused when ``lsn`` is not an open intent (``waiting``: an irreversible
    one waiting for approval), before anyone is asked."""
    head = run.store.head()
    records = run.store.forward(head) if head is not None else iter(())
    first = next(records, None)
    opened = Scan(run.wt, first).feed(records).open_intents() if first is not None else []
    intent = next((i for i in opened if i.lsn == lsn), None)
    if waiting and (intent is None or intent.tool != "exec"
                    or intent.args.get("irreversible") is not True):
        raise WalError(f"run {run.id}: LSN {lsn} is not an irreversible step waiting "
                       "for approval", "`git wal status` shows the open step; "
                       "`git wal exec --irreversible` logs one")
    if intent is None:
        raise WalError(f"run {run.id}: LSN {lsn} is not an open intent",
                       "`git wal status` lists the open ones; a closed step stays as "
                       "its commit or abort says")
    tag = agent_tag(intent)
    tool = intent.tool + (f" ({tag.get('name')} {tag.get('tool')})" if tag else "")
    argv = intent.args.get("argv")
    what = shlex.join(str(a) for a in argv) if isinstance(argv, list) else " ".join(
        intent.target)
    return safe(f"LSN {intent.lsn} of run {run.id}: {tool}: {what[:2000]}")


def resolve(run: Run, lsn: int, applied: bool, note: str = "",
            decided_by: str | None = None, yes: bool = False) -> Decision:
    """Close open intent ``lsn`` of ``run`` by a person's decision (``yes``: a
    person decided; otherwise asked on the terminal)."""
    person = a_person(run.store.repo, "resolve", "decision", "ask the user to run it in a "
                      "terminal (`git wal prompt` shows what is in doubt)",
                      step=describe(run, lsn) + (" -> applied" if applied else
                                                 " -> not applied"), yes=yes)
    who = decided_by or person
    with run.store.locked(wait=False):
        head = run.store.head()
        if head is None:
            raise RunBusy(f"run {run.id} has no log")
        records = run.store.forward(head)
        scan = Scan(run.wt, next(records)).feed(records)
        intent = next((i for i in scan.open_intents() if i.lsn == lsn), None)
        if intent is None:
            raise WalError(f"run {run.id}: LSN {lsn} is not an open intent",
                           "`git wal status` lists the open ones; a closed step stays as "
                           "its commit or abort says")
        if intent.tool == "exec" and (path := run.store.command_running(intent.lsn)):
            raise RunBusy(f"run {run.id}: the command of LSN {lsn} is still running",
                          f"wait for it to exit (`fuser {path}` names it), then decide")
        record, refs = _closing(run, intent, Lsn(scan.last.lsn + 1), applied, who, note)
        run.store.append([record], refs, head)
        if intent.tool == "exec":
            run.store.clear_command_lock(intent.lsn)
    return Decision(run.id, intent.lsn, record.lsn, applied, who, note, intent.tool,
                    intent.target)


def _closing(run: Run, intent: Intent, lsn: Lsn, applied: bool, who: str,
             note: str) -> tuple[Commit | Abort, list[Ref]]:
    if not applied:
        return Abort(run.id, lsn, intent.lsn, "decided: not applied; the tree was left as "
                     "found", decided_by=who, note=note), []
    if intent.tool == "exec":
        snap = run.wt.snapshot(run.id)
        return Commit(run.id, lsn, intent.lsn, (snap,), "decided: applied, as found",
                      decided_by=who, note=note), [Ref(snap, is_tree=True)]
    post, refs = [], []
    for path in intent.target:
        state = found(run.wt, path)
        if state in (DIRECTORY, SPECIAL):
            raise WalError(f"LSN {intent.lsn}: {path} is now a {state}, not a file a commit "
                           "can name", "put the file in place (or decide --not-applied)")
        if state != ABSENT:
            # One read: the bytes the decision accepts are the ones it names and keeps.
            saved = save(run.wt, path)
            state = saved.blob if saved is not None else ABSENT
            if saved is not None:
                refs.append(Ref(saved.blob))
        post.append(state)
    run.wt.settle(intent.target)  # what the decision accepts, durable before it says so
    return Commit(run.id, lsn, intent.lsn, tuple(post), "decided: applied, as found",
                  decided_by=who, note=note), refs
