"""§12 of the report: a run taken over in a fresh clone (`git wal resume`,
docs/remote-runs.md, "Taking a run over").

A repository of FILES files and a run of STEPS committed file steps (each a
`write_file` of another file, in process), whose log is on a bare repository
served by a real smart-HTTP server (lighttpd + git http-backend,
tests/gitservers.py). Then, REPEAT times, a fresh `git clone` and, timed as a
whole process, `git wal resume RUN` there: fetch the run, check the tree,
push the takeover by compare-and-swap, write the run's paths, report. Beside
it, its floor: `git fetch` of the same run's refs into a fresh clone (whole
process), what no resume can skip.

    python -m bench.resume [--steps N] [--files N]   (this section alone)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gitwal.wal import Wal
from tests.gitservers import HttpGitServer

from .common import GIT_WAL, QUICK, fmt_ratio, fmt_time, seal_environment
from .section import Section

STEPS = 100 if QUICK else 1000
FILES = 1000 if QUICK else 10_000
REPEAT = 2 if QUICK else 5


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def _origin(base: Path, url: str, files: int, steps: int) -> str:
    """The first machine: a repository of ``files`` files, pushed; a run of
    ``steps`` committed steps, its log pushed. The run's id."""
    repo = base / "first"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for i in range(files):
        d = repo / f"d{i % 100:02d}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "init")
    _git(repo, "remote", "add", "origin", url)
    _git(repo, "push", "-q", "origin", "main")
    wal = Wal(repo)
    run = wal.begin(task="a long run")
    for i in range(steps):
        run.write_file(f"d{i % files % 100:02d}/f{i % files}.txt", f"step {i}\n")
    subprocess.run([GIT_WAL, "push", "origin", "--run", run.id], cwd=repo, check=True,
                   capture_output=True)
    return run.id


def _timed(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def bench_resume(work: Path, steps: int = STEPS, files: int = FILES) -> Section:
    t0 = time.perf_counter()
    base = work / "resume"
    base.mkdir()
    resumes: list[float] = []
    fetches: list[float] = []
    with HttpGitServer(base / "server") as server:
        server.add_bare("repo.git")
        url = server.url("repo.git")
        run = _origin(base, url, files, steps)
        for i in range(REPEAT):
            # Interleaved: a resume (each in its own fresh clone, as a takeover
            # needs) and its floor, the fetch of the run alone.
            clone = base / f"resume{i}"
            _git(base, "clone", "-q", url, str(clone))
            resumes.append(_timed([GIT_WAL, "resume", run], clone))
            floor = base / f"fetch{i}"
            _git(base, "clone", "-q", url, str(floor))
            fetches.append(_timed(["git", "fetch", "-q", "origin",
                                   f"+refs/wal/{run}:refs/wal/{run}"], floor))
    resume, fetch = statistics.median(resumes), statistics.median(fetches)
    section = Section(
        "12. A run taken over in a fresh clone (`git wal resume`)",
        f"a repository of {files:,} files and a run of {steps:,} committed `write_file` "
        "steps whose log is on a bare repository behind lighttpd + git http-backend on "
        f"this machine; the median of {REPEAT} whole-process `git wal resume RUN` runs, "
        "each in a fresh `git clone` (not timed), beside the median of as many `git "
        "fetch`es of the run's log alone into a fresh clone (`python -m bench.resume` "
        "runs this section alone).",
        ["run", "`git wal resume`", "floor: `git fetch` of the run", "ratio"])
    section.rows.append([f"{steps:,} steps, {files:,} files", fmt_time(resume),
                         fmt_time(fetch), fmt_ratio(resume / fetch)])
    section.notes.append(
        f"Every resume pushed its takeover by compare-and-swap and wrote "
        f"{min(steps, files):,} paths; runs {', '.join(fmt_time(r) for r in resumes)}.")
    section.seconds = time.perf_counter() - t0
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--files", type=int, default=FILES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitwal-resume-") as tmp:
        work = Path(tmp)
        seal_environment(work / "home", work / "pycache")
        print(bench_resume(work, args.steps, args.files).render())


if __name__ == "__main__":
    main()
