"""Shared helpers for `make bench`: timing statistics, a sealed environment,
machine facts, subprocess helpers and markdown tables. Standard library only
(plus pygit2 for its version numbers)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel

BIN = Path(sys.executable).parent
GIT_WAL = str(BIN / "git-wal")
QUICK = os.environ.get("GITWAL_BENCH_QUICK", "") not in ("", "0")


# -- statistics ---------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Summary of repeated timings, in seconds."""

    n: int
    median: float
    p10: float
    p90: float
    lo: float
    hi: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        xs = sorted(samples)
        if len(xs) == 1:
            p10 = p90 = xs[0]
        else:
            deciles = statistics.quantiles(xs, n=10, method="inclusive")
            p10, p90 = deciles[0], deciles[-1]
        return cls(len(xs), statistics.median(xs), p10, p90, xs[0], xs[-1])


def timed(fn: Callable[[], object]) -> float:
    """Wall time of one call, in seconds."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fmt_time(seconds: float) -> str:
    """A duration with a unit that keeps 3 significant digits readable."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_spread(s: Stats) -> str:
    return f"{fmt_time(s.p10)} .. {fmt_time(s.p90)}"


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x"


def met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# -- environment --------------------------------------------------------------


BYTECODE_NOTE: list[str] = []  # how the environment handled bytecode, for the report


def seal_environment(home: Path, pycache: Path) -> None:
    """No user or system git config, identity or GITWAL_* setting leaks in.

    Applied to this process's own environment so that in-process gitwal (whose
    snapshots spawn git) and every subprocess see the same settings. Python
    subprocesses cache bytecode under ``pycache`` (as an installed tool would
    have it), even where the environment sets PYTHONDONTWRITEBYTECODE, and
    without writing into the source tree.
    """
    for key in list(os.environ):
        if key.startswith(("GIT_", "GITWAL_")):
            del os.environ[key]
    home.mkdir(parents=True, exist_ok=True)
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", ""):
        BYTECODE_NOTE.append("PYTHONDONTWRITEBYTECODE was set; the bench unset it")
    os.environ.update(
        PYTHONPYCACHEPREFIX=str(pycache),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
        PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""),
    )
    # No `git gc --auto` in the background: after a commit of thousands of
    # loose objects (a generated repo, a shadow repository) it would pack and
    # prune while later contenders are timed, and race the cleanup.
    (home / ".gitconfig").write_text("[gc]\n\tauto = 0\n")
    for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM):
        pygit2.settings.search_path[level] = str(home)


def sh(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run a command, fail loudly, return its stdout (``env`` adds to os.environ)."""
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})
    if proc.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(argv)}` exited {proc.returncode}:\n{proc.stderr.strip()}"
        )
    return proc.stdout


def run_quiet(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run a command with output discarded (what is timed), fail loudly.

    ``env`` adds to os.environ.
    """
    proc = subprocess.run(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=None if env is None else {**os.environ, **env},
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(argv)}` exited {proc.returncode}:\n{proc.stderr.decode().strip()}"
        )


# -- machine facts ------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def fs_type(path: Path) -> str:
    """Filesystem type of the mount holding ``path`` (longest /proc/mounts prefix)."""
    target = str(path.resolve())
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 3:
                continue
            mount = fields[1].replace("\\040", " ")
            inside = target == mount or target.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) > len(best):
                best, kind = mount, f"{fields[2]} (mounted at {mount}, device {fields[0]})"
    except OSError:
        pass
    return kind


def machine_facts(tmp: Path) -> list[tuple[str, str]]:
    git = sh("git", "--version").strip()
    strace = shutil.which("strace")
    return [
        ("nproc", str(os.cpu_count())),
        ("CPU", _cpu_model()),
        ("memory", _memory()),
        ("kernel", platform.release()),
        ("temp dir", f"`{tmp}`"),
        ("temp dir filesystem", fs_type(tmp)),
        ("Python", sys.version.split()[0]),
        ("pygit2", version("pygit2")),
        ("libgit2", pygit2.LIBGIT2_VERSION),
        ("git", git.removeprefix("git version ")),
        ("strace", strace or "not installed (fsync counts skipped)"),
        ("Python bytecode for subprocesses", "cached in the temp dir (PYTHONPYCACHEPREFIX)"
         + "".join(f"; {note}" for note in BYTECODE_NOTE)),
        ("git config", "`gc.auto=0` in the bench's own HOME: no background `git gc` "
         "during timings"),
        ("load average at start", " ".join(f"{x:.2f}" for x in os.getloadavg())),
    ]


# -- disk usage ---------------------------------------------------------------


@dataclass(frozen=True)
class DiskUse:
    files: int
    apparent: int  # sum of st_size
    allocated: int  # sum of st_blocks * 512 (what `du` reports)

    def __sub__(self, other: DiskUse) -> DiskUse:
        return DiskUse(
            self.files - other.files,
            self.apparent - other.apparent,
            self.allocated - other.allocated,
        )


def disk_use(root: Path, pattern: str | None = None) -> DiskUse:
    """Files, bytes and allocated bytes under ``root`` (files only)."""
    rx = re.compile(pattern) if pattern else None
    files = apparent = allocated = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if rx is not None and not rx.search(name):
                continue
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return DiskUse(files, apparent, allocated)
