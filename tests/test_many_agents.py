"""Many agents on one tree: N = 2..8 scripted agent processes (bench/scripted_agent.py)
edit a shared set of files at once through `git wal hook claude` (Edit and Write
calls, and Bash calls), are SIGKILLed at random (at one of their events, or at
any instant while they run, maybe inside a hook or a shell command), recovered
with `git wal recover --run R` (a recovery is sometimes SIGKILLed too, then run
again) and resumed from their logs, until every agent has finished its plan.

Then, with everything settled:

* no lost update: every committed post-state of every run is in the final tree,
  or the next step on that path in `git wal order`'s order began from it; and
  every plan step's marker line is in its file exactly once;
* `git wal order` reports no conflict, and its replay matches the tree;
* the base with the ordered steps applied one by one is the final tree;
* `git wal verify --all` passes, and no run has an open intent.

Events are ordered by the agents' own event lines (each waits for an answer),
never by time. The random choices (plans, kills, recoveries) come from
`GITWAL_MANY_AGENTS_SEED`; what a kill at "any instant" hits depends on the
machine's speed. `GITWAL_MANY_AGENTS_CASES` sets how many repositories are
played (the number of agents cycles through 2..8), `GITWAL_MANY_AGENTS_STEPS`
the plan steps per repository (split among its agents). `make torture` runs
more cases.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.agent_checks import lost_updates, ordered_steps, serial_replay
from bench.agent_driver import AgentProcess, ready_events
from bench.scripted_agent import call_step, log_rows
from gitwal.base.ids import ABSENT, Lsn
from gitwal.changes.history import Change
from gitwal.together.order import Step

from .conftest import GIT_WAL, init_repo, tree_of

SEED = int(os.environ.get("GITWAL_MANY_AGENTS_SEED", "20261204"))
CASES = int(os.environ.get("GITWAL_MANY_AGENTS_CASES", "2"))
STEPS = int(os.environ.get("GITWAL_MANY_AGENTS_STEPS", "12"))
SIZES = (2, 8, 5, 3, 7, 4, 6)  # agents per case, in turn
SHARED = tuple(f"shared/f{i}.txt" for i in range(4))
KILL_P = 0.05  # chance, at each event, of a kill
ANY_INSTANT_P = 0.3  # ... which takes another agent, wherever it is, instead
MAX_KILLS = 3  # per agent and case, so that every plan ends
RECOVER_KILL_P = 0.3  # chance that a recovery is SIGKILLed at a crash point first
RECOVER_CRASH_AT = ("mid-append", "after-append", "mid-restore")
LATER = 6  # a killed agent is recovered after 0..LATER events of the others


def plan(rng: random.Random, agent: int, n: int, shell: bool) -> list[dict[str, Any]]:
    """``n`` random steps; each adds one marker line (its own) to one file."""
    steps = []
    for j in range(n):
        marker = f"m-a{agent}-s{j:02d}"
        kind = rng.choices(("Edit", "Write", "Bash"), weights=(45, 35, 20 if shell else 0))[0]
        path = rng.choice(SHARED)
        step: dict[str, Any]
        if kind == "Edit":
            step = {"tool": "Edit", "path": path, "old": "// end", "new": f"{marker}\n// end"}
        elif kind == "Write":
            step = {"tool": "Write", "path": path, "append": f"{marker}\n"}
        else:
            # Shell steps append to a file only their agent changes: a shell step
            # takes no path locks, so one on a shared file races other runs' file
            # steps on that very file (docs/agents-together.md, "Shell steps among
            # others"); they still run while others commit file steps elsewhere.
            path = f"own/a{agent}.txt"
            step = {"tool": "Bash", "command": f"printf '%s\\n' {marker} >> {path}"}
        steps.append({"id": f"s{j:02d}", "marker": marker, "file": path, **step})
    return steps


def make_repo(path: Path, agents: int) -> Path:
    files = {p: f"# {p}\n// end\n" for p in SHARED}
    files.update({f"own/a{i}.txt": f"# agent {i}\n" for i in range(agents)})
    return init_repo(path, files)


def wal(repo: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GIT_WAL, *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


@dataclass
class Play:
    repo: Path
    rng: random.Random
    agents: list[AgentProcess]
    where: str
    dead: dict[str, int] = field(default_factory=dict)  # agent -> events until recovered
    finished: set[str] = field(default_factory=set)
    counts: Counter[str] = field(default_factory=Counter)
    trace: deque[str] = field(default_factory=lambda: deque(maxlen=60))

    def fail(self, what: str) -> str:
        return f"{what} ({self.where}, repo {self.repo}); last events: {'; '.join(self.trace)}"

    def kill(self, agent: AgentProcess, how: str) -> None:
        agent.kill()
        self.dead[agent.name] = self.rng.randint(0, LATER)
        self.counts[how] += 1
        self.trace.append(f"KILL {agent.name} ({how})")

    def recover(self, agent: AgentProcess) -> None:
        """`git wal recover --run R` (maybe SIGKILLed once first); a step left in
        doubt (a shell command that may have run) is put back with --restore."""
        st = json.loads(wal(self.repo, "status", "--run", agent.run, "--json").stdout or "{}")
        if st.get("open") and self.rng.random() < RECOVER_KILL_P:  # it has work to do
            point = self.rng.choice(RECOVER_CRASH_AT)
            done = wal(self.repo, "recover", "--run", agent.run, "--json",
                       env={"GITWAL_CRASH_AT": point})
            self.counts["recover killed" if done.returncode == -9 else "recover passed"] += 1
            self.trace.append(f"recover {agent.name} with crash at {point}: "
                              f"{done.returncode}")
        done = wal(self.repo, "recover", "--run", agent.run, "--json")
        if done.returncode == 1 and "no run" in done.stderr:
            self.trace.append(f"recover {agent.name}: no run yet")
            return
        if done.returncode == 3:  # in doubt
            self.counts["in doubt"] += 1
            done = wal(self.repo, "recover", "--run", agent.run, "--restore", "--json")
        assert done.returncode == 0, self.fail(f"recover {agent.run}: {done.stderr}")
        report = json.loads(done.stdout)
        for item in report["intents"]:
            self.counts[f"{item['outcome']}/{item['action']}"] += 1
        self.trace.append(f"recover {agent.name}: " + ", ".join(
            f"LSN {i['lsn']} {i['tool']} {i['outcome']}/{i['action']}"
            for i in report["intents"]))
        assert not report["in_doubt"], self.fail(f"{agent.run} still in doubt")

    def revive(self, agent: AgentProcess) -> None:
        del self.dead[agent.name]
        self.recover(agent)
        agent.start()

    def answer(self, agent: AgentProcess, ev: dict[str, Any]) -> None:
        self.trace.append(f"{agent.name} {ev['ev']} {ev.get('step') or ''}")
        if ev["ev"] in ("refused", "failed"):
            self.counts[ev["ev"]] += 1
        if ev["ev"] == "done":
            self.finished.add(agent.name)
        elif self.rng.random() < KILL_P and agent.kills < MAX_KILLS:
            others = [a for a in self.agents if a.running and not a.waiting
                      and a is not agent and a.kills < MAX_KILLS]
            if others and self.rng.random() < ANY_INSTANT_P:
                self.kill(self.rng.choice(others), "any instant")
            else:
                self.kill(agent, f"at {ev['ev']}")
                return
        agent.go()

    def tick(self) -> None:
        """One event of some agent went by: recover the dead whose time came."""
        for name in list(self.dead):
            self.dead[name] -= 1
            if self.dead[name] < 0:
                self.revive(next(a for a in self.agents if a.name == name))

    def run(self) -> None:
        try:
            self.play()
        finally:  # a failure leaves no agent running
            for a in self.agents:
                if a.running:
                    a.kill()

    def play(self) -> None:
        for a in self.agents:
            a.start()
        while any(a.running for a in self.agents) or self.dead:
            if not any(a.running for a in self.agents):
                for name in list(self.dead):  # no one left to wait for
                    self.revive(next(a for a in self.agents if a.name == name))
                continue
            for agent, ev in ready_events(self.agents):
                if ev is None:
                    assert agent.name in self.finished, self.fail(f"{agent.name} exited early")
                    continue
                if agent.running:  # not killed while another event was answered
                    self.answer(agent, ev)
                    self.tick()


def check(play: Play, plans: dict[str, list[dict[str, Any]]], base: Path) -> None:
    repo, fail = play.repo, play.fail
    twice: list[str] = []  # shell steps run again after a kill (ShellForks, below)
    for agent in play.agents:
        st = json.loads(wal(repo, "status", "--run", agent.run, "--json").stdout)
        assert st["open"] == [], fail(f"{agent.run} has open intents {st['open']}")
        committed = Counter(call_step(str(r["args"]["agent"]["call"]))
                            for r in log_rows(repo, agent.run)
                            if r["type"] == "intent" and r["status"] == "committed")
        want = Counter(s["id"] for s in plans[agent.name])
        assert committed == want, fail(f"{agent.run}: steps committed {committed}")
        for s in plans[agent.name]:
            n = (repo / s["file"]).read_text().splitlines().count(s["marker"])
            if n > 1 and s["tool"] == "Bash":
                twice.append(f"{s['marker']} (Bash) is {n} times in {s['file']}")
                continue
            assert n == 1, fail(f"{s['marker']} ({s['tool']}) is {n} times in {s['file']}")
    verify = wal(repo, "verify", "--all")
    assert verify.returncode == 0, fail(f"verify --all: {verify.stdout} {verify.stderr}")
    report, steps = ordered_steps(repo)
    tools = {(s["run"], s["lsn"]): s["tool"] for s in report["steps"]}
    shell_forks = [c for c in report["conflicts"] if c["kind"] == "fork"
                   and any(tools.get((s["run"], s["lsn"])) == "exec" for s in c["steps"])]
    others = [c for c in report["conflicts"] if c not in shell_forks]
    assert others == [] and report["replay_differs"] == [], fail(
        f"git wal order: {others} {report['replay_differs']}")
    assert len(report["runs"]) == len(play.agents), fail(str(report))
    if shell_forks:
        raise ShellForks(fail(f"git wal order: forks with a shell step: {shell_forks}"))
    if twice:
        raise ShellForks(fail(f"shell steps run twice: {twice}"))
    assert report["ok"], fail(str(report))
    assert lost_updates(repo, steps) == [], fail(f"lost updates: {lost_updates(repo, steps)}")
    serial_replay(repo, base, steps)
    assert tree_of(base) == tree_of(repo), fail("the serial replay differs from the tree")


class ShellForks(AssertionError):
    """`git wal order` reports forks that a shell step takes part in (below)."""


# A shell step snapshots the whole tree before and after its command, so what
# another run commits while the command runs (a file step, or another shell
# step's command) is in its post tree as if the command had made it: `git wal
# order` then sees two steps change that path from one state and reports a fork
# (docs/agents-together.md, "Shell steps among others"). Excluding from a shell
# step what other runs committed while it ran does not cover a file step that
# wrote before the shell step's post snapshot and committed after it, nor two
# shell steps whose commands overlap. Until a shell step's effect leaves out
# other runs' concurrent changes, the workload with shell steps is expected to
# report such forks (and only those: anything else fails the test); every other
# check of it is the same, and runs before. Likewise two shell steps whose
# commands overlap may each be credited with the other's change: a killed one
# whose change the other's snapshot took in (and committed) is then found to
# have changed nothing of its own, and the agent runs it again (its marker
# twice). Only a Bash marker may be doubled, and only this raises ShellForks.
SHELL_FORKS = pytest.mark.xfail(
    reason="a shell step's snapshots take in other runs' concurrent shell changes: a fork, "
    "or a killed step credited to another and run again (docs/agents-together.md, 'Two "
    "shell steps whose commands overlap')",
    raises=ShellForks, strict=False)


@pytest.mark.slow
@pytest.mark.parametrize("shell", [False, pytest.param(True, marks=SHELL_FORKS)],
                         ids=["file-tools", "with-shell-steps"])
def test_many_agents_random_edits_kills_and_recoveries(tmp_path: Path, shell: bool) -> None:
    rng = random.Random(SEED + shell)
    totals: Counter[str] = Counter()
    for case in range(CASES):
        n = SIZES[case % len(SIZES)]
        repo = make_repo(tmp_path / f"case{case}", n)
        base = tmp_path / f"case{case}-base"
        shutil.copytree(repo, base, symlinks=True)
        plans, agents = {}, []
        for i in range(n):
            name = f"a{i}"
            plans[name] = plan(rng, i, max(2, STEPS // n), shell)
            session = str(uuid.UUID(int=rng.getrandbits(128)))
            path = tmp_path / f"case{case}-{name}.json"
            path.write_text(json.dumps({"session": session, "steps": plans[name]}))
            agents.append(AgentProcess(name, repo, path))
        play = Play(repo, rng, agents, f"seed {SEED}, case {case}, {n} agents")
        play.run()
        check(play, plans, base)
        totals.update(play.counts)
        totals["steps"] += sum(len(p) for p in plans.values())
        totals["agents"] += n
        shutil.rmtree(repo)  # a failing case's repository is kept for inspection
        shutil.rmtree(base)
    print(f"\nmany agents ({'with' if shell else 'no'} shell steps): seed {SEED}, {CASES} "
          f"cases: {dict(sorted(totals.items()))}")
    if CASES >= 2:  # the kills and the races must happen, or the test checks little
        assert totals["at pre"] + totals["at wrote"] + totals["any instant"] > 0, totals
        assert totals["refused"] + totals["failed"] > 0, totals


# -- the lost-update rule itself (no agents) -------------------------------------------


def test_the_lost_update_rule_names_a_fork_and_a_post_the_tree_lost(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r", {"p": "base\n"})
    s0, s1, s2 = (git_hash(repo, text) for text in ("base\n", "one\n", "two\n"))

    def step(run: str, lsn: int, before: str, after: str) -> Step:
        return Step(run, Lsn(lsn), "write_file", (Change("p", before, 0o100644, after),))

    (repo / "p").write_text("two\n")
    chained = [step("a", 2, s0, s1), step("b", 2, s1, s2)]
    assert lost_updates(repo, chained) == []
    forked = [step("a", 2, s0, s1), step("b", 2, s0, s2)]  # b never saw a's update
    [problem] = lost_updates(repo, forked)
    assert "run a LSN 2" in problem and "began from" in problem
    (repo / "p").unlink()  # the last post is not in the tree
    [problem] = lost_updates(repo, chained)
    assert "run b LSN 2" in problem and "the tree holds something else" in problem
    assert lost_updates(repo, [step("a", 2, s0, ABSENT)]) == []


def git_hash(repo: Path, text: str) -> str:
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=text,
                          capture_output=True, text=True, check=True).stdout.strip()
