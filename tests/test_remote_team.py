"""A team of machines on one remote (docs/remote-runs.md): ``GITWAL_TEAM_AGENTS``
(default 3, at most 8) scripted agents, each in a clone of its own with
``wal.remote`` and commit durability, all at once against a real smart-HTTP
server. Each signs its appends and claims with a key every machine trusts,
claims its own directory on the remote, is refused when it steps into a
neighbour's, and loses machines at random (a step SIGKILLed at a crash point,
the machine's processes killed, its directory deleted); a fresh clone takes
the run over with `git wal resume`, claims again and goes on from the facts.

In the end: each agent's plan steps committed exactly once, its tree
byte-identical to the same plan never interrupted, no step into another's
directory logged anywhere, and a clean clone verifies every run on the
remote (`verify --all --remote`) and orders them (`order --remote`) against
the tree their work adds up to: no fork, no lost update.
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import git, init_repo, ok, tree_of, wal
from .gitservers import HttpGitServer
from .test_remote_replication import Setup, _setup, _stop_pusher, local_head, remote_head, until
from .test_resume import _committed_steps, _kill_machine, _records

AGENTS = max(2, min(8, int(os.environ.get("GITWAL_TEAM_AGENTS", "3"))))
PLAN = 4
LOSSES = 2  # machines each agent may lose
CRASHES = ("after-intent", "mid-write", "after-apply", "after-verify")


def _text(agent: int, n: int) -> str:
    return f"agent {agent} step {n}\n" + "y" * (agent * 7 + n) + "\n"


def _path(agent: int, n: int) -> str:
    return f"team/{agent}/f{n}.txt"


def _do(clone: Path, agent: int, n: int, crash: str | None = None) -> int:
    return wal(clone, "apply", "--step", str(n), "write-file", _path(agent, n), "--from", "-",
               input=_text(agent, n).encode(),
               env={"GITWAL_CRASH_AT": crash} if crash else None).returncode


def _landed(bare: Path, clone: Path, run: str) -> Callable[[], bool]:
    return lambda: remote_head(bare, run) == local_head(clone, run)


class Team:
    """The machines' shared setting: the server, and one key per machine that
    may ever exist, each trusted by every machine (one allowed-signers file)."""

    def __init__(self, s: Setup) -> None:
        self.s = s
        self.allowed = s.base / "allowed_signers"
        self.keys: dict[str, Path] = {}
        for agent in range(AGENTS):
            for m in range(LOSSES + 1):
                name = f"a{agent}m{m}"
                key = s.base / "keys" / name
                ok(s.clone, "keygen", "--path", str(key))
                ok(s.clone, "trust", "add", f"{key}.pub", "--name", f"{name}@team",
                   "--file", str(self.allowed))
                self.keys[name] = key
        self.machines: list[Path] = []
        self.lost = 0
        self.lock = threading.Lock()

    def machine(self, name: str) -> Path:
        path = self.s.base / name
        git(self.s.base, "clone", "-q", self.s.server.url("logs.git"), str(path))
        for key, value in (("wal.remote", "origin"), ("wal.remote.durability", "commit"),
                           ("wal.remote.linger", "5"), ("wal.signingKey", str(self.keys[name])),
                           ("gpg.ssh.allowedSignersFile", str(self.allowed))):
            git(path, "config", key, value)
        with self.lock:
            self.machines.append(path)
        return path


def _agent(team: Team, agent: int, seed: int, barrier: threading.Barrier,
           out: dict[int, tuple[Path, str]]) -> None:
    rng = random.Random(seed * 100 + agent)
    m, lost = team.machine(f"a{agent}m0"), 0
    run = ok(m, "begin", "--task", f"agent {agent}", "--claim", f"team/{agent}/*",
             *[a for n in range(1, PLAN + 1) for a in ("--step", f"write f{n}")]).strip()
    barrier.wait(timeout=300)  # every directory is claimed on the remote now
    neighbour = (agent + 1) % AGENTS
    ok(m, "fetch", "origin")  # this clone's copy of the others' claims
    before = _records(m, run)
    intrude = wal(m, "apply", "write-file", f"team/{neighbour}/mine.txt", "--from", "-",
                  input=b"not yours\n")
    assert intrude.returncode != 0 and f"agent {neighbour}" in intrude.stderr, (
        seed, intrude.stderr)
    assert _records(m, run) == before, seed  # refused before its intent
    barrier.wait(timeout=300)  # no machine is lost while another checks its refusal
    done = 0
    while done < PLAN:
        n = done + 1
        forced = agent == 0 and n == 2 and lost == 0  # at least one machine is lost
        if lost < LOSSES and (forced or rng.random() < 0.35):
            crash = rng.choice(CRASHES)
            assert _do(m, agent, n, crash) != 0, f"seed {seed}: {crash} did not kill"
            until("the open step on the remote", _landed(team.s.bare, m, run))
            _kill_machine(m)
            lost += 1
            m = team.machine(f"a{agent}m{lost}")
            doc = json.loads(ok(m, "resume", run, "--json"))
            ok(m, "claim", f"team/{agent}/*")  # the takeover ended the lost machine's claim
            committed = _committed_steps(m, run)
            assert committed == list(range(1, len(committed) + 1)), (seed, committed)
            done = len(committed)
            if doc["closed"] is not None:
                assert "redo LSN" in doc["prompt"], (seed, doc["prompt"])
            continue
        assert _do(m, agent, n) == 0, f"seed {seed}: agent {agent} step {n}"
        done = n
    out[agent] = (m, run)
    with team.lock:
        team.lost += lost


@pytest.mark.slow
def test_a_team_of_machines_loses_no_work_and_no_update(http_git_server: HttpGitServer,
                                                         tmp_path: Path) -> None:
    seed = int(os.environ.get("GITWAL_TEAM_SEED", random.randrange(1 << 30)))
    s = next(_setup(http_git_server, tmp_path))
    team = Team(s)
    barrier = threading.Barrier(AGENTS)
    out: dict[int, tuple[Path, str]] = {}
    errors: list[BaseException] = []

    def work(agent: int) -> None:
        try:
            _agent(team, agent, seed, barrier, out)
        except BaseException as e:  # reported below, with the seed
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(a,)) for a in range(AGENTS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise AssertionError(f"seed {seed}: {errors[0]!r}") from errors[0]

        assert team.lost >= 1
        straight = init_repo(tmp_path / "straight", {"a.txt": "0\n"})
        for agent, (m, run) in sorted(out.items()):
            until("on the remote", _landed(s.bare, m, run))
            assert _committed_steps(m, run) == list(range(1, PLAN + 1)), f"seed {seed}"
            assert not (m / "team" / str((agent + 1) % AGENTS) / "mine.txt").exists()
            ok(straight, "begin", "--task", f"agent {agent}")
            for n in range(1, PLAN + 1):
                assert _do(straight, agent, n) == 0
        # The tree their work adds up to (as merging their branches would).
        judge = s.base / "judge"
        git(s.base, "clone", "-q", s.server.url("logs.git"), str(judge))
        for agent in out:
            for n in range(1, PLAN + 1):
                (judge / "team" / str(agent)).mkdir(parents=True, exist_ok=True)
                (judge / _path(agent, n)).write_text(_text(agent, n))
        assert tree_of(judge) == tree_of(straight), f"seed {seed}"
        ok(judge, "verify", "--all", "--remote", "origin")
        order = json.loads(ok(judge, "order", "--remote", "origin", "--json"))
        assert order["ok"] is True and order["conflicts"] == [], (seed, order)
        assert sorted(order["runs"]) == sorted(run for _m, run in out.values())
        logged = {p for st in order["steps"] for p in st["paths"]}
        assert logged == {_path(a, n) for a in out for n in range(1, PLAN + 1)}, seed
    finally:
        for m in team.machines:
            if m.exists():
                _stop_pusher(m)
