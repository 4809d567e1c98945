"""The driver's side of scripted agents (bench/scripted_agent.py) started with
``--lockstep``: each agent's events one by one, each answered (``go``) or
answered with a SIGKILL, so kills are ordered by events instead of by time.

:meth:`AgentProcess.kill` kills the agent's whole process group (a hook or
command it runs) and waits (up to HANG seconds) until none of it is left, so
that no one recovers a run while a dying hook still holds its lock.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import scripted_agent
from .scripted_agent import run_of

AGENT = Path(scripted_agent.__file__).resolve()


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of process group ``pgid`` is left (/proc)."""
    with os.scandir("/proc") as entries:
        names = [e.name for e in entries if e.name.isdigit()]
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


class AgentProcess:
    """One scripted agent process started with ``--lockstep``: its events one by
    one, each answered (`go`) or answered with a SIGKILL."""

    def __init__(self, name: str, repo: Path, plan: Path, env: dict[str, str] | None = None
                 ) -> None:
        self.name, self.repo, self.plan, self.env = name, repo, plan, env
        self.session = json.loads(plan.read_text())["session"]
        self.run = run_of(self.session)
        self.proc: subprocess.Popen[str] | None = None
        self.kills = 0
        self.waiting = False  # it sent an event and waits for the answer

    def start(self) -> None:
        self.proc = subprocess.Popen(
            # By path, not `-m`: the agent runs in the repository, where the
            # project's own packages are not importable (it needs only stdlib).
            [sys.executable, str(AGENT), str(self.plan), "--lockstep"],
            cwd=self.repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1, env=self.env,
            start_new_session=True)

    @property
    def running(self) -> bool:
        return self.proc is not None

    def fileno(self) -> int:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def next_event(self) -> dict[str, Any] | None:
        """The next event; None when the agent exited (then it is reaped)."""
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line:
            event: dict[str, Any] = json.loads(line)
            self.waiting = True
            return event
        code = self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self.close()
        if code != 0:
            raise RuntimeError(f"agent {self.name} exited {code}: {err.strip()[-3000:]}")
        return None

    def go(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.waiting = False
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL the agent and its process group (a hook it runs dies with it)."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        # The hook or command it ran may still be dying (holding the run lock):
        # gone, all of them, before anyone recovers the run.
        deadline = time.monotonic() + HANG
        while group_alive(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        self.close()
        self.kills += 1

    def close(self) -> None:
        if self.proc is not None:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if f is not None:
                    try:
                        f.close()
                    except OSError:  # a "go" still buffered for a process now gone
                        pass
            self.proc = None
        self.waiting = False


HANG = 300.0  # seconds without an event from any running agent: something hangs


def ready_events(agents: list[AgentProcess]) -> list[tuple[AgentProcess, dict[str, Any] | None]]:
    """The next events of the running agents that have one ready ((agent, None) for
    one that exited); waits for at least one."""
    live = [a for a in agents if a.running]
    if not live:
        return []
    with selectors.DefaultSelector() as sel:
        for a in live:
            sel.register(a.fileno(), selectors.EVENT_READ, a)
        ready = sel.select(HANG)
    if not ready:
        raise RuntimeError(f"no agent said anything for {HANG:.0f} s")
    return [(key.data, key.data.next_event()) for key, _ in ready]


def events(agents: list[AgentProcess]) -> Iterator[tuple[AgentProcess, dict[str, Any] | None]]:
    """(agent, event) as they come from every running agent, until none runs; the
    caller answers each event (``agent.go()``) or kills the agent."""
    while batch := ready_events(agents):
        for agent, ev in batch:
            if ev is None or agent.running:  # not one the caller killed meanwhile
                yield agent, ev
