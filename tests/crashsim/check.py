"""Record a workload, then check crash states against the invariants.

For each state: write it to a fresh directory, run the real
``git wal recover --run <id> --redo --restore --json``, let the agent finish
its task as a resumed agent would, and check

1. no committed record lost: every record the log showed at the crash (the
   chain under the ref as it survived, which includes every append whose ref
   update and directory fsync completed before the crash) is still in the
   log, unchanged;
2. no record half-visible: ``git wal log --json`` succeeds, LSNs are dense;
3. ``git fsck --strict --full --no-dangling`` is clean;
4. the final tree equals the uninterrupted run's.

``recover`` may exit non-zero only when the run has no log yet (the plan's
append was not durable).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from ..conftest import GIT_WAL, init_repo, tree_of
from .image import Image
from .model import CrashState, Model, state_id
from .replay import materialise
from .trace import Trace, convert, fidelity_errors, run_traced
from .workloads import Workload

TIMEOUT = 120


@dataclass
class Recording:
    """One uninterrupted, traced run of a workload."""

    workload: Workload
    root: Path  # the repository the run left
    snapshot: Path  # a copy taken right before the run
    script: Path
    trace: Trace
    final_tree: str
    rows: list[dict[str, Any]]  # `git wal log --json` of the finished run
    lsn_of: dict[str, int]  # append commit id -> the highest LSN it carries


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def record(workload: Workload, where: Path) -> Recording:
    where.mkdir(parents=True, exist_ok=True)
    script = where / "agent.py"
    script.write_text(workload.agent)
    root = init_repo(where / "repo", workload.files)
    snapshot = where / "initial"
    shutil.copytree(root, snapshot, symlinks=True)
    out = where / "trace.txt"
    proc = run_traced([sys.executable, str(script), str(root)], root, out)
    if proc.returncode != 0:
        raise AssertionError(f"traced run of {workload.name} failed: {proc.stderr.decode()}")
    with out.open(encoding="ascii") as lines:
        trace = convert(lines, root, snapshot, _umask())
    errors = fidelity_errors(trace, snapshot, root)
    if not errors:  # and writing the image out gives the same directory
        replayed = where / "replayed"
        materialise(_final(trace, snapshot), replayed)
        errors = [f"replayed: {e}" for e in fidelity_errors(trace, snapshot, replayed)]
        shutil.rmtree(replayed)
    if errors:
        raise AssertionError("the trace does not replay to the final directory:\n"
                             + "\n".join(errors[:20]))
    log = _wal(root, "log", "--run", workload.run, "--json")
    assert log.returncode == 0, log.stderr
    rows = [json.loads(line) for line in log.stdout.splitlines()]
    return Recording(workload, root, snapshot, script, trace, _tree(root), rows,
                     _lsn_of(root, workload.run))


def _final(trace: Trace, snapshot: Path) -> Image:
    image = trace.image(snapshot)
    for op in trace.ops:
        image.apply(op)
    return image


def _lsn_of(root: Path, run: str) -> dict[str, int]:
    repo = pygit2.Repository(str(root))
    out: dict[str, int] = {}
    commit: pygit2.Commit | None = repo.references["refs/wal/" + run].peel(pygit2.Commit)
    while commit is not None:
        names = [e.name or "" for e in commit.tree]
        lsns = [int(n[:12]) for n in names if n.endswith(".json")]
        out[str(commit.id)] = max(lsns)
        commit = commit.parents[0] if commit.parents else None
    return out


def _wal(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GIT_WAL, *args], cwd=repo, capture_output=True, text=True,
                          timeout=TIMEOUT)


def _tree(repo: Path) -> str:
    tree = tree_of(repo)
    (repo / ".git" / "test-scratch.index").unlink()
    return tree


def lsn_visible(rec: Recording, image: Image) -> int | None:
    """LSN of the newest record the state's log shows (0: no log; None: the ref
    names something that is not an append of the run)."""
    data = image.read(f".git/refs/wal/{rec.workload.run}")
    if data is None:
        return 0
    return rec.lsn_of.get(data.decode("ascii", "replace").strip())


@dataclass
class Result:
    state: CrashState
    problems: list[str]
    durable: int | None  # LSN made durable before the crash
    visible: int | None  # LSN the crash state's ref shows
    outcomes: list[str] = field(default_factory=list)
    where: Path | None = None  # kept when a problem was found


def check_state(rec: Recording, model: Model, state: CrashState, dest: Path,
                keep: bool = False) -> Result:
    image = model.image(state, rec.snapshot)
    durable = lsn_visible(rec, model.image(model.durable(state.crash), rec.snapshot))
    visible = lsn_visible(rec, image)
    result = Result(state, [], durable, visible)
    problems = result.problems
    if visible is None:
        problems.append("the ref names a commit that is not an append of the run")
    elif durable is not None and visible < durable:
        problems.append(f"the ref shows LSN {visible}, older than the durable {durable}")
    materialise(image, dest)
    try:
        _check_dir(rec, dest, visible or 0, result)
    except subprocess.TimeoutExpired as e:
        problems.append(f"timed out: {e.cmd}")
    problems[:] = [p.replace(str(dest), "<state>") for p in problems]
    if problems or keep:
        result.where = dest
    else:
        shutil.rmtree(dest, ignore_errors=True)
    return result


def _check_dir(rec: Recording, dest: Path, visible: int, result: Result) -> None:
    problems = result.problems
    run = rec.workload.run
    recover = _wal(dest, "recover", "--run", run, "--redo", "--restore", "--json")
    if recover.returncode == 0:
        report = json.loads(recover.stdout)
        result.outcomes = [i["outcome"] for i in report.get("intents", [])]
    elif not (visible == 0 and f"no run {run}" in recover.stderr):
        problems.append(f"recover exited {recover.returncode}: {_gist(recover.stderr)}")
        return
    agent = subprocess.run([sys.executable, str(rec.script), str(dest)], capture_output=True,
                           text=True, timeout=TIMEOUT)
    if agent.returncode != 0:
        problems.append(f"the resumed agent failed ({agent.returncode}): {_gist(agent.stderr)}")
        return
    log = _wal(dest, "log", "--run", run, "--json")
    if log.returncode != 0:
        problems.append(f"git wal log failed: {log.stderr.strip()}")
    else:
        rows = [json.loads(line) for line in log.stdout.splitlines()]
        lsns = [r["lsn"] for r in rows]
        if lsns != list(range(1, len(rows) + 1)):
            problems.append(f"LSNs are not dense: {lsns}")
        for want, got in zip(rec.rows[:visible], rows, strict=False):
            if _strip(want) != _strip(got):
                problems.append(f"record LSN {want['lsn']} changed: {got}")
                break
        if len(rows) < visible:
            problems.append(f"{visible - len(rows)} record(s) visible at the crash are lost")
    fsck = subprocess.run(["git", "fsck", "--strict", "--full", "--no-dangling", "--no-progress"],
                          cwd=dest, capture_output=True, text=True, timeout=TIMEOUT)
    if fsck.returncode != 0 or fsck.stdout.strip():
        text = (fsck.stdout + fsck.stderr).strip().splitlines()
        problems.append(f"git fsck: {'; '.join(text[:4])}")
    tree = _tree(dest)
    if tree != rec.final_tree:
        diff = subprocess.run(["git", "diff", "--stat", rec.final_tree, tree], cwd=dest,
                              capture_output=True, text=True).stdout.strip()
        problems.append(f"final tree differs from the uninterrupted run: {diff}")


def _gist(stderr: str) -> str:
    """The line that says what went wrong: git's fatal/error, or an exception."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")) or "fatal:" in line:
            return line
    return lines[-1] if lines else "(no output)"


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "status"}


def scratch_root() -> Path | None:
    """A tmpfs to write states to, if there is a roomy one: the checks fsync a
    lot, and the durability of the checking run itself does not matter."""
    shm = Path("/dev/shm")
    try:
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 1 << 30:
            return Path(tempfile.mkdtemp(prefix="gitwal-crash-", dir=shm))
    except OSError:
        pass
    return None


def check_all(rec: Recording, model: Model, states: Sequence[CrashState], where: Path,
              workers: int | None = None,
              progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Check states in parallel (one worker per CPU by default); states that
    break an invariant are kept under ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    scratch = scratch_root() or where

    def one(state: CrashState) -> Result:
        name = f"s{state.crash}-{state_id(state)}"
        result = check_state(rec, model, state, scratch / name)
        if result.where is not None and scratch != where:
            result.where = Path(shutil.move(result.where, where / name))
        if progress is not None:
            progress(result)
        return result

    try:
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
            return list(pool.map(one, states))
    finally:
        if scratch != where:
            shutil.rmtree(scratch, ignore_errors=True)


def reload(rec_dir: Path, workload: Workload) -> Recording:
    """A recording made earlier in ``rec_dir`` (for investigation scripts)."""
    root, snapshot = rec_dir / "repo", rec_dir / "initial"
    with (rec_dir / "trace.txt").open(encoding="ascii") as lines:
        trace = convert(lines, root, snapshot, _umask())
    log = _wal(root, "log", "--run", workload.run, "--json")
    rows = [json.loads(line) for line in log.stdout.splitlines()]
    return Recording(workload, root, snapshot, rec_dir / "agent.py", trace, _tree(root), rows,
                     _lsn_of(root, workload.run))
