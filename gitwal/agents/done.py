"""Done only with proof: whether an agent's turn may end (docs/agents.md).

At a turn-end hook that can refuse the stop (Claude Code ``Stop`` and
``SubagentStop``, Codex ``Stop``), after the run was settled (External.settle),
the turn may end only when (a subagent's: rule 1 only)

1. no intent of the stopping thread is open (a shell step in doubt stays
   open at the end of a turn: nothing says whether it finished);
2. every change the log had to record as ``unlogged`` has been named to the
   model once. The log already holds those bytes; what is missing is that
   the model looks at them. Being told once is the proof asked for: asking it
   to undo or rewrite them until they vanish could destroy someone's work;
3. the check the local user configured (``git config wal.done.check CMD``)
   passed on the tree as it is now. A pass is kept (per run, with the
   snapshot of the tree it passed on) so it is not run again while nothing
   changed. The command is only ever read from the user's git config, never
   from a log: a log is data, not a program.

Loop safety: a refusal makes the agent go on, and its next stop says so
(``stop_hook_active``); while it does, the same reason refuses at most
:data:`LIMIT` times in a row, any reasons :data:`CHAIN` times (a program that
keeps changing files would otherwise be news at every stop), then the stop is
let through with a warning for the user. A failure of gitwal itself never
refuses a stop (engine.failure: a blocked stop would keep the agent running).

What a refusal of rule 1 or 2 says to the model is done_reasons.py's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from ..base.durable import atomic_write, makedirs_durable
from ..base.repository import wal_dir
from ..records.model import Intent, Record, Unlogged, agent_tag
from ..run import Run
from .done_reasons import open_reason, unlogged_reason
from .external import External

LIMIT = 3  # refusals in a row for one reason while the agent continues because of them
CHAIN = 6  # refusals in a row for any reasons (new unlogged changes at every stop, say)
CHECK_TIMEOUT = 540.0  # seconds; below the 600 s the turn-end hooks are installed with
TAIL = 3000  # characters of a failed check's output the model is shown


@dataclass(frozen=True)
class DoneConfig:
    """``wal.done.*`` of the local user's git config."""

    enforce: bool = True  # rules 1 and 2; rule 3 only with a check
    check: str = ""
    timeout: float = CHECK_TIMEOUT

    @classmethod
    def of(cls, repo: pygit2.Repository) -> DoneConfig:
        c = repo.config
        try:
            enforce = bool(c.get_bool("wal.done.enforce"))
        except (KeyError, pygit2.GitError, ValueError):
            enforce = True
        try:
            check = str(c["wal.done.check"]).strip()
        except (KeyError, pygit2.GitError):
            check = ""
        try:
            timeout = float(str(c["wal.done.checkTimeout"]))
        except (KeyError, pygit2.GitError, ValueError):
            timeout = CHECK_TIMEOUT
        return cls(enforce, check, timeout if timeout > 0 else CHECK_TIMEOUT)


@dataclass(frozen=True)
class Verdict:
    block: str | None = None  # refuse the stop: the reason, for the model
    note: str | None = None  # a stop let through that the user should know about


@dataclass
class State:
    """What the gate remembers per run (``.git/wal/done/<run>.json``)."""

    told: int = 0  # unlogged records up to this LSN were named to the model
    told_open: list[int] = field(default_factory=list)  # open intents named to it
    passed: dict[str, str] = field(default_factory=dict)  # {"check": cmd, "tree": oid}
    # thread -> [key, refusals in a row for key, refusals in a row for any reason]
    refused: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> State:
        try:
            data = json.loads(path.read_bytes())
            return cls(int(data["told"]), [int(n) for n in data["told_open"]][-32:],
                       {str(k): str(v) for k, v in data["passed"].items()},
                       {str(k): [str(v[0]), int(v[1]), int(v[2])]
                        for k, v in data["refused"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            return cls()  # none yet, or unreadable: start afresh (it only saves work)

    def save(self, path: Path) -> None:
        makedirs_durable(path.parent)
        data = {"told": self.told, "told_open": self.told_open, "passed": self.passed,
                "refused": self.refused}
        atomic_write(path, json.dumps(data, sort_keys=True).encode() + b"\n", tag="done")


def state_path(run: Run) -> Path:
    return wal_dir(run.store.repo) / "done" / f"{run.id}.json"


def verdict(run: Run, ext: External, config: DoneConfig, continuing: bool,
            thread: str | None) -> Verdict:
    """Whether the turn of ``thread`` (None: the main agent) may end now.

    ``continuing``: the agent goes on because a stop hook refused its last
    stop (the payload's ``stop_hook_active``)."""
    if not config.enforce:
        return Verdict()
    path = state_path(run)
    state = State.load(path)
    loaded = State.load(path)  # written back only when it changed: a stop is frequent
    who = thread or "main"
    if not continuing:
        state.refused.pop(who, None)  # a stop of its own: a new chain of refusals
    records = run.since_checkpoint()
    reasons: list[str] = []
    keys: list[str] = []
    open_ = _open_of(records, thread)
    if open_ is not None:
        reasons.append(open_reason(run, ext, open_))
        keys.append(f"open:{open_.lsn}")
        if open_.lsn not in state.told_open:
            state.told_open = [*state.told_open, open_.lsn][-32:]
    # A subagent answers to the main agent, which is told at its own stop: its
    # stop is refused for its own open steps only (rule 1).
    fresh = _untold(_since_told(run, records, state), state) if thread is None else []
    if thread is None:
        state.told = max(state.told, records[0].lsn - 1)  # read up to the segment now
    if fresh:
        reasons.append(unlogged_reason(run, fresh))
        keys.append(f"unlogged:{fresh[-1].lsn}")
        state.told = fresh[-1].lsn
    if not reasons and config.check and thread is None:
        failed = _check(run, ext, config, state)
        if failed:
            reasons.append(failed)
            keys.append("check")
    if not reasons:
        state.refused.pop(who, None)
        if state != loaded:
            state.save(path)
        return Verdict()
    key = "|".join(keys)
    last = state.refused.get(who) if continuing else None
    count = last[1] + 1 if last and last[0] == key else 1
    chain = last[2] + 1 if last else 1
    if count > LIMIT or chain > CHAIN:
        state.refused.pop(who, None)
        state.save(path)
        why = (f"{LIMIT} refusals in a row for the same reason" if count > LIMIT else
               f"{CHAIN} refusals in a row")
        return Verdict(note=f"gitwal: let the turn end after {why} (run {run.id}): "
                            + " ".join(reasons))
    state.refused[who] = [key, count, chain]
    state.save(path)
    return Verdict(block="\n\n".join(reasons) + (
        f"\n\n(gitwal refuses to end the turn for this reason at most {LIMIT} times in a "
        f"row; this is refusal {count} of {LIMIT}.)"))


# -- rule 1: an open intent -------------------------------------------------------


def _open_of(records: Sequence[Record], thread: str | None) -> Intent | None:
    """The open intent when it is the stopping thread's (another thread's call may
    still be running: its own stop, or the next call, deals with it)."""
    last = records[-1]
    if not isinstance(last, Intent):
        return None
    tag = agent_tag(last)
    mine = tag.get("thread") if tag is not None else None
    return last if mine == thread else None


# -- rule 2: changes no step explains --------------------------------------------------


def _since_told(run: Run, records: list[Record], state: State) -> list[Record]:
    """The records that may hold untold changes: the segment, and the log before
    it too when a checkpoint (made when the transcript was compacted) came after
    the last record told (a rare, one-time read of the whole log)."""
    if records[0].lsn <= state.told + 1:
        return records
    return [r for r in run.records() if state.told < r.lsn < records[0].lsn] + records


def _untold(records: Sequence[Record], state: State) -> list[Unlogged]:
    """``unlogged`` records the model was not told about: changes found before the
    session began (SessionStart) are not its turn's, nor those found when an
    intent it was already told about was settled."""
    settled = tuple(f"settling LSN {n}:" for n in state.told_open)
    return [r for r in records if isinstance(r, Unlogged) and r.lsn > state.told
            and not r.noticed.startswith("SessionStart")
            and not (settled and r.noticed.startswith(settled))
            and len(r.theirs) < len(r.paths)]  # other runs' logged steps are not unlogged



# -- rule 3: the user's check ---------------------------------------------------------


def _tree(run: Run) -> str:
    with run.store.locked():
        return str(run.wt.snapshot(run.id))


def _check(run: Run, ext: External, config: DoneConfig, state: State) -> str | None:
    """Run the configured check unless it passed on this very tree; the reason
    to refuse the stop, or None when it passed."""
    tree = _tree(run)
    if state.passed == {"check": config.check, "tree": tree}:
        return None
    code, output = run_check(config.check, run.wt.root, config.timeout)
    after = _tree(run)
    if after != tree:
        # The check's own changes (build output, caches that are not ignored)
        # are recorded now, as the check's: nothing for the model to be told.
        out = ext.check("wal.done.check (the configured check changed the tree)")
        state.told = max([state.told, *(r.lsn for r in out.of(Unlogged))])
    if code == 0:
        state.passed = {"check": config.check, "tree": after}
        return None
    state.passed = {}
    ended = (f"did not finish within {config.timeout:g} s" if code is None
             else f"failed (exit code {code})")
    tail = output[-TAIL:]
    cut = "...\n" if len(output) > TAIL else ""
    return (f"gitwal: the turn cannot end yet: the project's check `{config.check}` "
            f"(git config wal.done.check) {ended} on the tree as it is now. Its output"
            f"{' ends' if cut else ''}:\n{cut}{tail.rstrip()}\n\nNext: fix what it reports, "
            "then end your turn again; the check runs again at your next stop.")


def run_check(command: str, top: Path, timeout: float) -> tuple[int | None, str]:
    """``sh -c command`` at the top of the tree, stdin closed, output captured:
    (exit code or None when it timed out and was killed, its output)."""
    proc = subprocess.Popen(["sh", "-c", command], cwd=top, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own group: killed whole
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        code = None
    return code, out.decode("utf-8", "replace")


__all__ = ["CHAIN", "LIMIT", "DoneConfig", "State", "Verdict", "run_check", "state_path", "verdict"]
