"""`make demo-agents`: two scripted agents (bench/scripted_agent.py) on one
TypeScript project at once, through gitwal's Claude Code hooks: agent 1 renames
getUserById across 40 files, agent 2 upgrades a dependency (package.json, the
lockfile, and source files that also call getUserById). Each is SIGKILLed once
mid-step and resumes from the log after `git wal recover --run <its run>`; a
call refused because the other holds the path is retried. Then `git wal order`
(with its replay check), `git wal verify --all`, and the tree compared byte for
byte with the base where the ordered steps are applied one by one.

Kills are ordered by the agents' events (each waits for an answer after each
event), never by time."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import demo
from bench.agent_checks import ordered_steps, serial_replay
from bench.agent_driver import AgentProcess, events
from bench.demo import GIT_WAL, LOOKALIKE, NEW, OLD, differing, framed, make_project, tree_id

SESSIONS = ("a1a1a1a1-5e1f-4c1e-9a55-2f4d6c8e1b23", "b2b2b2b2-5e1f-4c1e-9a55-2f4d6c8e1b23")
HELD_AT = 23  # agent 1's step (and file) where it is killed; agent 2 edits that file too
PACKAGE = '{\n  "name": "users-app",\n  "dependencies": {\n    "http-kit": "^1.9.2"\n  }\n}\n'


def lock(version: str) -> str:
    return json.dumps({"name": "users-app", "lockfileVersion": 3, "packages": {
        "node_modules/http-kit": {"version": version,
                                  "resolved": f"https://registry.example/http-kit-{version}.tgz"}}},
                      indent=2) + "\n"


def say(text: str) -> None:
    print(f"demo-agents: {text}", flush=True)


def plans(files: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rename = [{"id": f"r{n:02d}", "tool": "Write", "path": rel,
               "sub": [rf"\b{OLD}\b", NEW]} for n, rel in enumerate(files, start=1)]
    shared = [files[HELD_AT - 1], files[HELD_AT + 4], files[HELD_AT + 9]]
    ret = "return `${user.name} "
    upgrade = [
        {"id": "d1", "tool": "Edit", "path": "package.json", "old": '"http-kit": "^1.9.2"',
         "new": '"http-kit": "^2.1.0"'},
        {"id": "d2", "tool": "Edit", "path": files[0],
         "old": "  return fetch(`/api/users/${id}`).then((r) => r.json());",
         "new": "  return http.get(`/api/users/${id}`).json<User>();"},
        {"id": "d3", "tool": "Edit", "path": files[0], "old": "export interface User",
         "new": 'import { http } from "http-kit";\n\nexport interface User'},
        {"id": "d4", "tool": "Edit", "path": shared[0], "old": ret,
         "new": "return `${formatName(user)} "},
        {"id": "d5", "tool": "Write", "path": "package-lock.json", "content": lock("2.1.0")},
        {"id": "d6", "tool": "Edit", "path": shared[1], "old": ret,
         "new": "return `${formatName(user)} "},
        {"id": "d7", "tool": "Edit", "path": shared[2], "old": ret,
         "new": "return `${formatName(user)} "},
    ]
    return rename, upgrade


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def recover(repo: Path, agent: AgentProcess) -> None:
    out = demo.run(repo, GIT_WAL, "recover", "--run", agent.run, "--json").stdout
    for item in json.loads(out)["intents"]:
        say(f"  `git wal recover --run {agent.run}`: LSN {item['lsn']} {item['tool']} "
            f"{' '.join(item.get('target') or [])}: {item['outcome']} -> {item['action']}")


class Story:
    """The two agents' events, answered in the order that makes the story."""

    def __init__(self, repo: Path, a1: AgentProcess, a2: AgentProcess, held: str) -> None:
        self.repo, self.a1, self.a2, self.held = repo, a1, a2, held
        self.a1_held = False  # agent 1 wrote the held file; its PostToolUse waits
        self.a2_waiting = False  # agent 2 read the held file; it waits for agent 1
        self.refusals = 0
        self.a1_recovered = self.a2_killed = False

    def answer(self, agent: AgentProcess, ev: dict[str, Any]) -> None:
        kind, step = ev["ev"], ev.get("step")
        if kind == "start":
            say(f"{agent.name} ({agent.run}) starts: {ev['done']} of {ev['steps']} steps "
                "done per its log" + (f", next {ev['next']}" if ev["next"] else ""))
        if kind == "refused":
            self.refusals += 1
            say(f"{agent.name} {step} ({ev['path']}): PreToolUse refused, exit 2:")
            say(f"  {first_line(ev['text'])[:150]}...")
        if kind == "failed":
            say(f"{agent.name} {step} ({ev['path']}): the file changed since it was read "
                "(the other run committed): the call fails, it reads the file again")
        if agent is self.a1 and kind == "wrote" and ev["path"] == self.held and not \
                self.a1_recovered:
            say(f"{agent.name} wrote {self.held} (step {step}); its PostToolUse is not run "
                "yet: the intent is open")
            self.a1_held = True
            if self.a2_waiting:
                self.a2_waiting = False
                self.a2.go()
            return  # held: killed later, never answered
        if agent is self.a2 and kind == "read" and step == "d4" and not self.a1_held \
                and not self.a1_recovered:
            self.a2_waiting = True  # answered once agent 1 holds the file
            return
        if agent is self.a2 and kind == "refused" and step == "d4":
            if self.a1.running:
                say(f"SIGKILL {self.a1.name} mid-step (intent open, file written, "
                    "no PostToolUse)")
                self.a1.kill()
            elif not self.a1_recovered and self.a2_killed:
                say(f"{self.a1.name}'s killed step still holds {self.held}: recover it")
                recover(self.repo, self.a1)
                self.a1_recovered = True
                say(f"{self.a1.name} resumes")
                self.a1.start()
        if agent is self.a2 and kind == "pre" and step == "d5" and not self.a2_killed:
            say(f"{agent.name} logged its intent for package-lock.json: SIGKILL it mid-step "
                "(nothing written yet)")
            agent.kill()
            self.a2_killed = True
            recover(self.repo, agent)
            say(f"{agent.name} resumes")
            agent.start()
            return
        if agent is self.a2 and kind == "post" and step == "d4":
            say(f"{agent.name} retried d4 ({self.held}), reading it again: committed on top "
                f"of {self.a1.name}'s rename")
        if kind == "done":
            say(f"{agent.name} done ({ev['steps']} steps)")
        agent.go()


def main() -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gitwal-demo-agents-") as tmp:
        top = Path(tmp)
        demo.ENV.update(demo.sealed_env(top / "home"))
        repo = top / "project"
        repo.mkdir()
        files = make_project(repo)
        (repo / "package.json").write_text(PACKAGE)
        (repo / "package-lock.json").write_text(lock("1.9.2"))
        demo.run(repo, "git", "add", "-A")
        demo.run(repo, "git", "commit", "-q", "-m", "http-kit 1.9.2")
        base = top / "serial"
        shutil.copytree(repo, base, symlinks=True)
        rename, upgrade = plans(files)
        held = files[HELD_AT - 1]
        agents = []
        for name, session, todo in (("agent 1", SESSIONS[0], rename),
                                    ("agent 2", SESSIONS[1], upgrade)):
            plan = top / f"{name.replace(' ', '')}.json"
            plan.write_text(json.dumps({"session": session, "steps": todo}))
            agents.append(AgentProcess(name, repo, plan, demo.ENV))
        a1, a2 = agents
        say(f"TypeScript project in {repo}: {len(files)} files call {OLD}; package.json "
            "pins http-kit ^1.9.2")
        say(f"agent 1 renames {OLD} -> {NEW} in {len(files)} files (one Write each); agent 2 "
            f"upgrades http-kit to 2.1.0 ({len(upgrade)} Edit/Write calls, 5 of them in 4 "
            "files agent 1 renames in); both at once, every call through `git wal hook claude`")
        story = Story(repo, a1, a2, held)
        for agent in agents:
            agent.start()
        for agent, ev in events(agents):
            if ev is not None:
                story.answer(agent, ev)

        fails = []
        say("`git wal order` (every committed step of both runs, one order; replay "
            "checked against the tree):")
        order = demo.run(repo, GIT_WAL, "order", ok=(0, 1))
        framed("git wal order", order.stdout + order.stderr)
        if order.returncode != 0:
            fails.append("git wal order reported conflicts or a replay difference")
        verify = demo.run(repo, GIT_WAL, "verify", "--all", ok=(0, 1, 2, 3))
        say(f"`git wal verify --all`: exit {verify.returncode}"
            + ("" if verify.returncode == 0 else f"\n{verify.stdout}{verify.stderr}"))
        if verify.returncode != 0:
            fails.append("git wal verify --all failed")

        report, steps = ordered_steps(repo)
        serial_replay(repo, base, steps)
        scratch = top / "scratch"
        scratch.mkdir()
        ids = (tree_id(repo, scratch), tree_id(base, scratch))
        diff = differing(repo, base)
        say(f"serial run: the base with the {len(steps)} steps applied one by one in that "
            f"order: tree {ids[1][:12]}, the agents' tree {ids[0][:12]}")
        if ids[0] != ids[1] or diff:
            fails.append(f"the serial run differs: {diff[:10]}")
        left = demo.run(repo, "git", "grep", "-w", "-l", OLD, ok=(0, 1)).stdout.split()
        kept = demo.run(repo, "git", "grep", "-w", "-l", LOOKALIKE, ok=(0, 1)).stdout.split()
        upgraded = sum("formatName(user)" in (repo / s["path"]).read_text()
                       and NEW in (repo / s["path"]).read_text()
                       for s in upgrade if s["id"] in ("d4", "d6", "d7"))
        say(f"`git grep -w {OLD}`: {len(left)} files; {LOOKALIKE} kept in {len(kept)}; "
            f"{upgraded} of 3 shared files carry both agents' changes; "
            f"{story.refusals} refused calls retried")
        if left or upgraded != 3 or '"^2.1.0"' not in (repo / "package.json").read_text() \
                or (repo / "package-lock.json").read_text() != lock("2.1.0"):
            fails.append("an agent's change is missing from the tree")
        if a1.kills != 1 or a2.kills != 1:
            fails.append(f"kills: agent 1 {a1.kills}, agent 2 {a2.kills} (1 each expected)")
        if fails:
            print("verdict: FAILED: " + "; ".join(fails))
            return 1
        print(f"verdict: OK ({len(steps)} steps of 2 runs in one order, both agents killed "
              f"once and recovered, {len(report['runs'])} runs verified, the serial run "
              f"identical) in {time.monotonic() - t0:.1f}s")
        return 0


if __name__ == "__main__":
    sys.exit(main())
