"""Running a step's commands: an exec step's command, a check, a confirm probe.

Only the command an intent records runs, and only if this clone wrote it
(log/authorship.py); it runs in the working tree with the step's run, LSN and
idempotency key in its environment. Under a time limit its whole process
group is killed when the limit passes.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.seconds import seconds
from ..log.authorship import ForeignCommand, require
from ..records.model import Intent
from ..worktree.tree import Worktree

OUTPUT_TAIL = 4000  # characters of a failed check's output kept in the abort record
DRAIN_SECONDS = 5  # how long a killed check's output is still read


def _step_env(intent: Intent) -> dict[str, str]:
    env = dict(os.environ, GITWAL_RUN=intent.run, GITWAL_LSN=str(intent.lsn),
               GITWAL_KEY=intent.key)
    env.pop("GITWAL_CRASH_AT", None)  # a child is not part of the crash test
    env.pop("GITWAL_PAUSE_AT", None)
    return env


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    output: str
    failure: str = ""  # why it failed, for the abort reason ("" when ok)
    code: int | None = None  # its exit status (None: killed at its time limit)


@dataclass(frozen=True)
class CommandResult:
    code: int  # the exit status (127: not found, 126: not executable, -9: killed)
    timed_out: float | None = None  # the limit, when it was killed for exceeding it

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.timed_out is None

    @property
    def failure(self) -> str:
        if self.timed_out is not None:
            return f"command timed out after {_secs(self.timed_out)} s"
        return f"command exited with status {self.code}"


def _secs(limit: float) -> str:
    return f"{limit:g}"


def command_timeout(wt: Worktree, timeout: float | None) -> float | None:
    """The limit for a step's command: ``timeout``, else ``git config
    wal.commandTimeout`` (seconds), else none."""
    if timeout is not None:
        return seconds(timeout, "the timeout", "pass a number of seconds")
    try:
        raw = str(wt.repo.config["wal.commandTimeout"])
    except KeyError:
        return None
    return seconds(raw, "wal.commandTimeout", "fix it with `git config wal.commandTimeout SECONDS`")


def _stop(proc: subprocess.Popen[bytes], group: bool) -> None:
    if group:
        _kill_group(proc)
    else:
        proc.kill()
    proc.wait()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command and everything it started in its process group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# Only the command an intent records runs, under that intent's proof of authorship.
_MISMATCH = "a step runs exactly the command its intent records; `git wal log` shows it"


def run_check(command: str, wt: Worktree, intent: Intent, hold: int | None = None,
              timeout: float | None = None, role: str = "check") -> CheckResult:
    """Run a verification command in the tree; exit 0 means it passed.

    ``role``: "check" (the intent's ``check``) or "confirm" (an exec intent's
    ``args.confirm``, the probe recovery runs to decide it). Only a command
    this clone wrote runs (authorship.require: raises ForeignCommand
    otherwise). ``hold``: a lock fd the command inherits
    (Store.command_lock). ``timeout``: seconds (default: wal.commandTimeout);
    past it the check's whole process group is killed and the check fails."""
    recorded = intent.check if role == "check" else intent.args.get("confirm")
    if command != recorded:
        raise ForeignCommand(f"run {intent.run} LSN {intent.lsn}: the {role} {command!r} "
                             "is not the one the intent records; it was not run", _MISMATCH)
    require(wt.repo, intent, role, command)
    limit = command_timeout(wt, timeout)
    proc = subprocess.Popen(
        command, shell=True, cwd=wt.root, env=_step_env(intent), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        pass_fds=() if hold is None else (hold,),
        # Its own process group only under a limit, so the limit can kill all of it.
        start_new_session=limit is not None,
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out = _drain(proc)
        text = out.decode("utf-8", "replace")[-OUTPUT_TAIL:]
        assert limit is not None
        return CheckResult(False, text,
                           f"check timed out after {_secs(limit)} s: {command}")
    except BaseException:
        _stop(proc, limit is not None)  # interrupted: as subprocess.run, leave nothing running
        raise
    text = (out + err).decode("utf-8", "replace")[-OUTPUT_TAIL:]
    return CheckResult(proc.returncode == 0, text,
                       "" if proc.returncode == 0 else f"{role} failed: {command}",
                       proc.returncode)


def _drain(proc: subprocess.Popen[bytes]) -> bytes:
    """What a killed check wrote; a process that left the group and still holds
    the pipe is not waited for."""
    try:
        out, err = proc.communicate(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return b""
    return out + err


def run_command(argv: Sequence[str], wt: Worktree, intent: Intent, hold: int,
                timeout: float | None = None) -> CommandResult:
    """Run an exec step's command with its idempotency key in the environment;
    it inherits ``hold``, the step's command lock (Store.command_lock).

    Only a command this clone wrote runs (authorship.require: raises
    ForeignCommand otherwise). ``timeout`` as for :func:`run_check`."""
    if list(argv) != intent.args.get("argv") or intent.tool != "exec":
        raise ForeignCommand(f"run {intent.run} LSN {intent.lsn}: the command {list(argv)!r} "
                             "is not the one the intent records; it was not run", _MISMATCH)
    require(wt.repo, intent, "command", " ".join(argv))
    limit = command_timeout(wt, timeout)
    try:
        proc = subprocess.Popen(list(argv), cwd=wt.root, env=_step_env(intent),
                                pass_fds=(hold,), start_new_session=limit is not None)
    except FileNotFoundError:
        return CommandResult(127)
    except PermissionError:
        return CommandResult(126)
    try:
        return CommandResult(proc.wait(timeout=limit))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return CommandResult(proc.wait(), limit)
    except BaseException:
        _stop(proc, limit is not None)
        raise
