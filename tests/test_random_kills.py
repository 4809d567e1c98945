"""SIGKILL a real agent process at random wall-clock instants during the
40-file rename, recover, resume, and compare with a run that was never killed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from .conftest import git, init_repo, tree_of, wal

N_FILES = 40
MIN_KILLS = int(os.environ.get("GITWAL_MIN_KILLS", "50"))
SEED = int(os.environ.get("GITWAL_KILL_SEED", "20261202"))

AGENT = r'''
import sys
from gitwal import Wal
from gitwal.base.errors import UnknownRun
from gitwal.records.model import Commit

wal = Wal(sys.argv[1])
try:
    run = wal.run("rename")
except UnknownRun:
    run = wal.begin(task="rename getUserById -> fetchUser", run_id="rename")
records = run.records()
by_lsn = {r.lsn: r for r in records}
done = {by_lsn[r.intent].target[0] for r in records if isinstance(r, Commit)}
for i in range(int(sys.argv[2])):
    path = f"src/m{i:02d}.ts"
    if path not in done:
        run.apply("replace_symbol", path=path, old="getUserById", new="fetchUser")
'''


def project() -> dict[str, str]:
    body = "import { getUserById } from './users';\n" + "".join(
        f"export const v{j} = getUserById('{j}') ?? getUserByIdCache;\n" for j in range(60)
    )
    return {f"src/m{i:02d}.ts": body for i in range(N_FILES)}


def start_agent(repo: Path, script: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(script), str(repo), str(N_FILES)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_random_sigkills_never_change_the_result(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    ref = init_repo(tmp_path / "ref", project())
    t0 = time.monotonic()
    proc = start_agent(ref, script)
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    full = time.monotonic() - t0
    want = tree_of(ref)

    rng = random.Random(SEED)
    kills = rounds = 0
    outcomes: dict[str, int] = {}
    while kills < MIN_KILLS:
        rounds += 1
        repo = init_repo(tmp_path / f"round{rounds}", project())
        while True:
            agent = start_agent(repo, script)
            try:
                _, err = agent.communicate(timeout=rng.uniform(0.0, full))
            except subprocess.TimeoutExpired:
                agent.kill()
                _, err = agent.communicate()
            if agent.returncode == 0:
                break
            assert agent.returncode == -9, err
            kills += 1
            rec = wal(repo, "recover", "--run", "rename", "--redo", "--json")
            if rec.returncode == 1 and "no run" in rec.stderr:
                continue  # killed before the plan was durable: nothing to recover
            assert rec.returncode == 0, f"seed {SEED} round {rounds}: {rec.stderr}"
            for item in json.loads(rec.stdout)["intents"]:
                outcomes[item["outcome"]] = outcomes.get(item["outcome"], 0) + 1
        assert tree_of(repo) == want, f"seed {SEED}: round {rounds} differs after {kills} kills"
        log = wal(repo, "log", "--run", "rename", "--json").stdout.splitlines()
        lsns = [json.loads(line)["lsn"] for line in log]
        assert lsns == list(range(1, len(lsns) + 1))
        git(repo, "fsck", "--strict")
    print(f"\n{kills} kills over {rounds} rounds, 0 differences; outcomes: {outcomes}")
