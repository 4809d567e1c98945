"""Power-loss crash states (docs/crash-states.md): trace a workload with strace,
enumerate what the disk may hold after a power cut at every barrier, write
each state out, run the real `git wal recover`, finish the run, and check the
invariants (no committed record lost or half-visible, fsck clean, same final
tree as an uninterrupted run).

GITWAL_CRASH_STATES: unset, a sample of DEFAULT_COUNT states per workload;
`all`, every distinct state (`make crash-states`); a number, that many.
GITWAL_CRASH_MODEL: `conservative` (default, must pass), `fuse` (conservative,
with syncfs and sync persisting nothing; the shell-step workload is always
also checked under it) or `ext4`.
GITWAL_CRASH_SEED: the sampling seed. GITWAL_CRASH_WORKERS: parallel checks.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from .crashsim.check import Recording, Result, check_all, check_state, record
from .crashsim.model import MODELS, select
from .crashsim.regress import CaseError, load, resolve
from .crashsim.workloads import IGNORED, WORKLOADS

# Read at import: the autouse `hermetic` fixture removes GITWAL_* variables.
_MODE = os.environ.get("GITWAL_CRASH_STATES", "").strip().lower()
MODEL = os.environ.get("GITWAL_CRASH_MODEL", "conservative")
SEED = int(os.environ.get("GITWAL_CRASH_SEED", "20261202"))
WORKERS = int(os.environ.get("GITWAL_CRASH_WORKERS", "0")) or None
DEFAULT_COUNT = 32
COUNT: int | None = None if _MODE == "all" else int(_MODE or DEFAULT_COUNT)
REGRESSIONS = sorted((Path(__file__).parent / "crashsim" / "regressions").glob("*.json"))

pytestmark = pytest.mark.skipif(shutil.which("strace") is None,
                                reason="strace is not installed (`make tools`)")

_recordings: dict[str, Recording] = {}


@pytest.fixture
def recording(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Recording]:
    """One traced, uninterrupted run per workload, shared by the tests of a
    session (taken under the first test's hermetic environment)."""

    def get(name: str) -> Recording:
        if name not in _recordings:
            _recordings[name] = record(WORKLOADS[name], tmp_path_factory.mktemp(name))
        return _recordings[name]

    return get


def _report(results: list[Result]) -> str:
    by_problem: dict[str, list[Result]] = {}
    for r in results:
        by_problem.setdefault(r.problems[0][:160], []).append(r)
    lines = []
    for problem, rs in sorted(by_problem.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"{len(rs)} state(s): {problem}")
        for r in rs[:3]:
            lines.append(f"    {r.state.label} (crash {r.state.crash}, durable LSN "
                         f"{r.durable}, visible {r.visible}) kept in {r.where}")
    return "\n".join(lines)


# Each workload under GITWAL_CRASH_MODEL; the one with a shell step also as on
# a FUSE mount, where syncfs persists nothing: what a shell command wrote must
# be durable by fsyncs of its own paths and directories before the commit.
CASES = [(name, MODEL) for name in sorted(WORKLOADS)]
if MODEL != "fuse":
    CASES.append(("mixed", "fuse"))


@pytest.mark.parametrize(("name", "model_name"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_crash_states(name: str, model_name: str, recording: Callable[[str], Recording],
                      tmp_path: Path) -> None:
    t0 = time.monotonic()
    rec = recording(name)
    model = MODELS[model_name](rec.trace)
    states = select(model, rec.snapshot, COUNT, SEED, IGNORED)
    t1 = time.monotonic()
    results = check_all(rec, model, states, tmp_path / "states", WORKERS)
    bad = [r for r in results if r.problems]
    outcomes = Counter(o for r in results for o in r.outcomes)
    print(f"\n{name}/{model.name}: {len(rec.trace.ops)} ops, {len(model.barriers())} barriers, "
          f"{len(states)} states checked in {time.monotonic() - t1:.1f}s "
          f"(+{t1 - t0:.1f}s to record and select), {len(bad)} violating; "
          f"recovery outcomes {dict(outcomes)}")
    assert not bad, f"{len(bad)} crash state(s) break an invariant:\n{_report(bad)}"


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path: Path, recording: Callable[[str], Recording], tmp_path: Path) -> None:
    """A saved crash state that once broke an invariant (see its JSON file)."""
    case = load(path)
    rec = recording(case.workload)
    model = MODELS[case.model](rec.trace)
    try:
        state = resolve(case, model)
    except CaseError as e:
        pytest.fail(f"{path.name} no longer matches the trace: {e}")
    result = check_state(rec, model, state, tmp_path / "state")
    assert not result.problems, (
        f"{case.name}: {state.describe(model.ops)}\n" + "\n".join(result.problems)
        + f"\n{case.diagnosis}\n(state kept in {result.where})"
    )
