"""Property: whatever a person does between a crash and `git wal recover`,
no byte they wrote is lost, and the tree is what the log plus their edits
explain.

Each case is one round on one long run: a random step (every file tool and a
shell step) through the real CLI, killed with SIGKILL at a random named crash
point (or not killed); then a simulated person edits, creates or deletes
random paths (targets of the step among them); then `git wal recover` with
random flags (and `--restore` after it when something is in doubt). After
every round:

* every file the person wrote is in the tree with their bytes, or its bytes
  are retrievable with the command a recovery report printed (`saved`), also
  after `git gc --prune=now`;
* a path the person deleted stays deleted unless a flag asked for a restore;
* every path the person did not touch since the last committed step on it
  holds exactly what the log's committed steps, from the plan's base commit,
  say it holds (no other writer exists).

`GITWAL_PERSON_CASES` sets the number of rounds (`make torture` runs 1000);
`GITWAL_PERSON_SEED` the seed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitwal import Wal
from gitwal.base.ids import ABSENT
from gitwal.changes.ledger import changes
from gitwal.records.model import Commit, Plan

from .conftest import git, init_repo, wal

CASES = int(os.environ.get("GITWAL_PERSON_CASES", "20"))
SEED = int(os.environ.get("GITWAL_PERSON_SEED", "20261203"))
FILES = [f"f{i}.txt" for i in range(6)]
FILE_POINTS = ["after-intent", "mid-write", "after-apply", "after-verify", "mid-append:2"]
MOVE_POINTS = [*FILE_POINTS, "between-paths"]
EXEC_POINTS = ["after-intent", "after-exec", "after-verify", "mid-append:2"]


def _present(repo: Path) -> list[str]:
    return sorted(p for p in [*FILES, "made.txt", "moved.txt"] if (repo / p).exists())


def _step(rng: random.Random, repo: Path, n: int) -> tuple[list[str], bytes | None, str]:
    """A random step whose tool can apply now, with a random crash point ('' = none)."""
    present = _present(repo)
    absent = [p for p in [*FILES, "made.txt", "moved.txt"] if p not in present]
    kinds = ["write", "line", "exec"] + (["delete", "move"] if present and absent else [])
    kind = rng.choice(kinds)
    if kind == "write":
        path = rng.choice(FILES)
        body = (f"agent {n}\n" * rng.randint(1, 400)).encode()
        args, stdin, points = ["apply", "write-file", path, "--from", "-"], body, FILE_POINTS
    elif kind == "line":
        args, stdin, points = (["apply", "ensure-line", rng.choice(FILES), f"line {n}"], None,
                               FILE_POINTS)
    elif kind == "delete":
        args, stdin, points = ["apply", "delete-file", rng.choice(present)], None, FILE_POINTS
    elif kind == "move":
        args, stdin, points = (["apply", "move-file", rng.choice(present), rng.choice(absent)],
                               None, MOVE_POINTS)
    else:
        a, b = rng.sample(FILES, 2)
        script = f"printf 'exec {n}\\n' >> {a} && printf 'exec {n}\\n' > {b}"
        args, stdin, points = ["exec", "--", "sh", "-c", script], None, EXEC_POINTS
    point = rng.choice(points) if rng.random() < 0.75 else ""
    return args, stdin, point


def _person(rng: random.Random, repo: Path, n: int, near: list[str]
            ) -> tuple[dict[str, bytes], set[str]]:
    """Random edits; returns {path: bytes written} and the paths deleted."""
    wrote: dict[str, bytes] = {}
    deleted: set[str] = set()
    for path in rng.sample(sorted(set(near) | set(FILES)), rng.randint(0, 2)):
        what = rng.random()
        if what < 0.6:
            data = f"person {n} {rng.random()}\n".encode()
            (repo / path).write_bytes(data)
            wrote[path] = data
        elif (repo / path).exists():
            (repo / path).unlink()
            deleted.add(path)
    return wrote, deleted


def _targets(repo: Path) -> list[str]:
    """The targets of the newest open intent, if any (what a person may have been
    looking at when the agent died)."""
    out = wal(repo, "log", "--json")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    for r in reversed(rows):
        if r["type"] == "intent" and r["status"] == "open":
            return [x for x in r["target"] if x != "."]
    return []


def _recover(repo: Path, flags: list[str]) -> tuple[int, dict[str, Any]]:
    r = wal(repo, "recover", "--json", *flags)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 3), r.stderr
    return r.returncode, json.loads(r.stdout)


def _retrievable(repo: Path, path: str, data: bytes, saved: list[dict[str, Any]]) -> bool:
    for s in saved:
        if s["path"] == path:
            got = subprocess.run(["git", "cat-file", "blob", s["object"]], cwd=repo,
                                 capture_output=True).stdout
        elif s["path"] == ".":
            got = subprocess.run(["git", "cat-file", "blob", f"{s['object']}:{path}"],
                                 cwd=repo, capture_output=True).stdout
        else:
            continue
        if got == data:
            return True
    return False


def _explained(repo: Path) -> dict[str, str]:
    """What the log says each path holds: the base commit's tree, then every
    committed step in LSN order."""
    w = Wal(repo)
    history = [r for r, _ in w.history("p")]
    plan = history[0]
    assert isinstance(plan, Plan)
    base = w.repo[plan.base]
    assert isinstance(base, pygit2.Commit)
    want = {e.name: str(e.id) for e in base.tree if e.type_str == "blob"}
    for path, held in changes(w.wt, history):
        if held.state == ABSENT:
            want.pop(path, None)
        else:
            want[path] = held.state
    return want


def _actual(repo: Path) -> dict[str, str]:
    return {p.name: str(pygit2.hash(p.read_bytes())) for p in repo.iterdir()
            if p.is_file()}


def _committed_paths(repo: Path, since: int) -> set[str]:
    w = Wal(repo)
    history = [r for r, _ in w.history("p")]
    late = [r for r in history if r.lsn > since or not isinstance(r, Commit)]
    return {p for p, _held in changes(w.wt, late)}


@pytest.mark.slow
def test_no_byte_a_person_wrote_is_lost(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    repo = init_repo(tmp_path / "r", {p: f"base {p}\n" for p in FILES})
    assert wal(repo, "begin", "--run", "p", "--task", "edits").returncode == 0
    touched: set[str] = set()  # paths whose newest writer is the person
    seen: Counter[str] = Counter()
    for n in range(CASES):
        args, stdin, point = _step(rng, repo, n)
        env = {"GITWAL_CRASH_AT": point} if point else None
        r = wal(repo, *args, input=stdin, env=env)
        assert "Traceback" not in r.stderr, r.stderr
        mark = len(wal(repo, "log", "--json").stdout.splitlines())  # before the person
        wrote, deleted = _person(rng, repo, n, _targets(repo))
        touched |= set(wrote) | deleted
        flags = rng.choice([[], ["--restore"], ["--redo"], ["--redo", "--restore"]])
        code, report = _recover(repo, flags)
        saved = [s for o in report["intents"] for s in o["saved"]]
        seen.update(o["outcome"] for o in report["intents"])
        if "--restore" not in flags and "--redo" not in flags:
            for path in deleted:
                assert not (repo / path).exists(), f"round {n}: {path} came back"
        if code == 3:
            # Nothing was written over the person's work while in doubt.
            for path, data in wrote.items():
                assert (repo / path).read_bytes() == data, f"round {n}: {path}"
            code, again = _recover(repo, ["--restore"])
            assert code == 0, again
            saved += [s for o in again["intents"] for s in o["saved"]]
        seen["saved"] += len(saved)
        if saved and rng.random() < 0.3:
            git(repo, "gc", "-q", "--prune=now")
        for path, data in wrote.items():
            here = (repo / path).exists() and (repo / path).read_bytes() == data
            assert here or _retrievable(repo, path, data, saved), (
                f"round {n} ({' '.join(args)} killed at {point or 'nothing'}, {flags}): "
                f"the person's bytes of {path} are lost")
        touched -= _committed_paths(repo, mark)
        want, have = _explained(repo), _actual(repo)
        for path in sorted(set(want) | set(have)):
            if path in touched:
                continue
            assert want.get(path) == have.get(path), (
                f"round {n} ({' '.join(args)} killed at {point or 'nothing'}, {flags}): "
                f"{path} holds {have.get(path)}, the log explains {want.get(path)}")
    print(f"{CASES} rounds: {dict(seen)}")
    if CASES >= 20:  # enough rounds that a run without these would mean a broken test
        assert seen["in-doubt"] and seen["saved"], seen
