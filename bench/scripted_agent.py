"""A scripted coding agent that edits a repository through gitwal's Claude Code hooks,
the way Claude Code does: for every ``Edit``, ``Write`` or ``Bash`` call it runs
``git wal hook claude`` with the ``PreToolUse`` payload, carries the call out
itself, then runs the hook with ``PostToolUse`` (or ``PostToolUseFailure``).
Its run is ``claude-<session_id>`` (docs/agents.md).

It behaves as a model would where several agents share one tree
(docs/agents-together.md):

* a ``PreToolUse`` that is refused (exit 2, "PATH is being changed by run R")
  changed nothing: the agent sets the step aside, goes on with the others, then
  reads the file again and retries;
* a file tool checks, as Claude Code's do, that the file is what the agent last
  read; if another run changed it since, the call fails (``PostToolUseFailure``)
  and the agent reads the file again and retries;
* started again after a kill (and `git wal recover --run R`), it resumes from
  facts: a step is done when the log holds a committed intent whose
  ``tool_use_id`` names it, whatever the agent remembered.

A plan is JSON: ``{"session": ID, "steps": [STEP...]}``, each step one of

* ``{"id": "s01", "tool": "Edit", "path": P, "old": S, "new": T, "replace_all": B}``
* ``{"id": "s02", "tool": "Write", "path": P, "content": S}`` (``"append": S``
  writes what was read plus S; ``"sub": [REGEX, REPL]`` what was read with
  every match replaced)
* ``{"id": "s03", "tool": "Bash", "command": S}``

Step ids hold no ``_`` (a call id is ``toolu_<step>_<pid>_<n>``).

The agent prints one JSON line per event on stdout (``start``, ``read``,
``pre``, ``refused``, ``wrote``, ``failed``, ``post``, ``done``). With
``--lockstep`` it waits after each event for a line on stdin before it goes on,
so a driver can order kills by events (and SIGKILL it at any of them) instead
of by time; bench/agent_driver.py is that driver's side.

Run: ``python -m bench.scripted_agent PLAN.json [--lockstep]`` in the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

GIT_WAL = str(Path(sys.executable).parent / "git-wal")
# The holder is named once it has written itself into the path's lock file.
BUSY = re.compile(r"is being changed by (?:run (\S+)|another run's step)")
BACKOFF = 0.05  # seconds the agent idles when every step left is held by other runs
PASSES = 2000  # passes over the steps left before the agent gives up (a plan that cannot end)


def run_of(session: str) -> str:
    return f"claude-{session}"


def call_step(call: str) -> str | None:
    """The plan step a tool_use_id names (``toolu_<step>_<pid>_<n>``)."""
    parts = call.split("_")
    return parts[1] if len(parts) == 4 and parts[0] == "toolu" else None


def log_rows(repo: Path, run: str) -> list[dict[str, Any]]:
    """`git wal log --run RUN --json`; [] while the run has no log."""
    proc = subprocess.run([GIT_WAL, "log", "--run", run, "--json"], cwd=repo,
                          capture_output=True, text=True)
    if proc.returncode == 1 and "no run" in proc.stderr:
        return []
    if proc.returncode != 0:
        raise RuntimeError(f"git wal log --run {run}: {proc.stderr.strip()}")
    return [json.loads(line) for line in proc.stdout.splitlines()]


def done_steps(repo: Path, run: str) -> set[str]:
    """The plan steps the log says are done: an intent of theirs was committed."""
    done = set()
    for r in log_rows(repo, run):
        agent = (r.get("args") or {}).get("agent") or {}
        if r["type"] == "intent" and r["status"] == "committed":
            step = call_step(str(agent.get("call", "")))
            if step is not None:
                done.add(step)
    return done


class Refused(Exception):
    """The PreToolUse was refused: another run holds the path."""

    def __init__(self, holder: str, text: str) -> None:
        super().__init__(text)
        self.holder = holder


@dataclass
class Agent:
    repo: Path
    session: str
    lockstep: bool
    calls: int = 0
    out: IO[str] = field(default_factory=lambda: sys.stdout)

    def event(self, ev: str, **fields: Any) -> None:
        self.out.write(json.dumps({"ev": ev, **fields}) + "\n")
        self.out.flush()
        if self.lockstep and not sys.stdin.readline():
            sys.exit(0)  # the driver is gone: stop here

    def hook(self, event: str, tool: str, tool_input: dict[str, Any], call: str) -> None:
        payload: dict[str, Any] = {
            "session_id": self.session, "cwd": str(self.repo),
            "transcript_path": f"/tmp/scripted-agent/{self.session}.jsonl",
            "permission_mode": "default", "hook_event_name": event, "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": call}
        if event == "PostToolUse":
            payload["tool_response"] = {"success": True}
        elif event == "PostToolUseFailure":
            payload.update(error="File has been modified since read", is_interrupt=False)
        proc = subprocess.run([GIT_WAL, "hook", "claude"], cwd=self.repo,
                              input=json.dumps(payload).encode(), capture_output=True)
        err = proc.stderr.decode(errors="replace")
        if proc.returncode == 2 and event == "PreToolUse" and (m := BUSY.search(err)):
            raise Refused(m.group(1) or "another run", err.strip())
        if proc.returncode != 0:
            raise RuntimeError(f"hook {event} {tool} exited {proc.returncode}: {err.strip()}")

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.repo / rel).read_bytes()
        except FileNotFoundError:
            return None

    def tool_input(self, step: dict[str, Any], seen: bytes | None) -> dict[str, Any]:
        """What the model would send, given the file as it last read it."""
        if step["tool"] == "Bash":
            return {"command": step["command"], "description": step["id"]}
        path = str(self.repo / step["path"])
        if step["tool"] == "Edit":
            return {"file_path": path, "old_string": step["old"], "new_string": step["new"],
                    "replace_all": bool(step.get("replace_all", False))}
        text = (seen or b"").decode()
        if "append" in step:
            content = text + step["append"]
        elif "sub" in step:
            content = re.sub(step["sub"][0], step["sub"][1], text)
        else:
            content = step["content"]
        return {"file_path": path, "content": content}

    def carry_out(self, step: dict[str, Any], tool_input: dict[str, Any],
                  seen: bytes | None) -> bool:
        """The tool itself; False when it fails (the file changed since it was read)."""
        if step["tool"] == "Bash":
            done = subprocess.run(["bash", "-c", step["command"]], cwd=self.repo)
            return done.returncode == 0
        if self.read(step["path"]) != seen:
            return False  # Claude Code: "File has been modified since read"
        target = self.repo / step["path"]
        if step["tool"] == "Edit":
            text = (seen or b"").decode()
            old, new = tool_input["old_string"], tool_input["new_string"]
            if old not in text:
                return False
            data = (text.replace(old, new) if tool_input["replace_all"]
                    else text.replace(old, new, 1)).encode()
        else:
            data = tool_input["content"].encode()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return True

    def attempt(self, step: dict[str, Any]) -> bool:
        """One try at a step: True when it committed."""
        seen = None if step["tool"] == "Bash" else self.read(step["path"])
        self.event("read", step=step["id"], path=step.get("path"))
        self.calls += 1
        call = f"toolu_{step['id']}_{os.getpid()}_{self.calls}"
        tool_input = self.tool_input(step, seen)
        self.hook("PreToolUse", step["tool"], tool_input, call)
        self.event("pre", step=step["id"], path=step.get("path"), call=call)
        if not self.carry_out(step, tool_input, seen):
            self.event("failed", step=step["id"], path=step.get("path"))
            self.hook("PostToolUseFailure", step["tool"], tool_input, call)
            return False
        self.event("wrote", step=step["id"], path=step.get("path"))
        self.hook("PostToolUse", step["tool"], tool_input, call)
        self.event("post", step=step["id"], path=step.get("path"))
        return True

    def work(self, steps: list[dict[str, Any]]) -> None:
        done = done_steps(self.repo, run_of(self.session))
        todo = [s for s in steps if s["id"] not in done]
        self.event("start", run=run_of(self.session), done=len(steps) - len(todo),
                   steps=len(steps), next=todo[0]["id"] if todo else None)
        for _ in range(PASSES):
            if not todo:
                break
            left = []
            for step in todo:
                try:
                    if not self.attempt(step):
                        left.append(step)  # read again, retry on the next pass
                except Refused as r:
                    self.event("refused", step=step["id"], path=step.get("path"),
                               holder=r.holder, text=str(r))
                    left.append(step)
            if len(left) == len(todo):
                time.sleep(BACKOFF)  # every step left is held by others: let them finish
            todo = left
        if todo:
            raise RuntimeError(f"gave up after {PASSES} passes: {[s['id'] for s in todo]}")
        self.event("done", run=run_of(self.session), steps=len(steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan", type=Path)
    ap.add_argument("--lockstep", action="store_true",
                    help="wait for a line on stdin after each event")
    args = ap.parse_args()
    plan = json.loads(args.plan.read_text())
    Agent(Path.cwd(), plan["session"], args.lockstep).work(plan["steps"])


if __name__ == "__main__":
    main()
