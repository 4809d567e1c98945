"""Syscall counts per operation, with ``strace -f -c``.

``python -m bench.probe KIND DIR N`` sets up one operation of bench/ops.py in
``DIR`` and runs it ``N`` times. :func:`per_op` runs that under strace with
``N`` and with ``0`` and divides the difference by ``N``, so start-up and setup
(imports, opening the repository, the plan record) cancel out.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .ops import GitwalAppend, GitwalStep, JsonlAppend, ReferenceStep, SqliteAppend

KINDS: dict[str, Callable[[Path], Callable[[], None]]] = {
    "gitwal-append": GitwalAppend,
    "jsonl-append": JsonlAppend,
    "sqlite-append": SqliteAppend,
    "gitwal-step": GitwalStep,
    "gitwal-step-grouped": lambda root: GitwalStep(root, "bench-step-grouped", True),
    "reference-step": ReferenceStep,
}
FSYNCS = "fsync,fdatasync"
BY_PATH = "fsync-by-path"  # per_op(trace=BY_PATH): fsync + fdatasync calls by the path synced


def strace_available() -> bool:
    return shutil.which("strace") is not None


def _parse(summary: str) -> dict[str, int]:
    """Calls per syscall from ``strace -c`` output."""
    counts: dict[str, int] = {}
    for line in summary.splitlines():
        fields = line.split()
        if len(fields) < 5 or not fields[0].replace(".", "", 1).isdigit():
            continue
        name = fields[-1]
        if name == "total":
            continue
        try:
            counts[name] = int(fields[3])
        except ValueError:
            continue
    return counts


def _strace(kind: str, root: Path, n: int, options: list[str]) -> str:
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        argv = ["strace", "-f", *options, "-o", out.name,
                sys.executable, "-m", "bench.probe", kind, str(root), str(n)]
        proc = subprocess.run(argv, capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
        if proc.returncode != 0:
            raise RuntimeError(f"strace probe {kind} failed:\n{proc.stderr.strip()}")
        return Path(out.name).read_text()


def _traced(kind: str, root: Path, n: int, trace: str | None) -> dict[str, int]:
    options = ["-c"] + (["-e", f"trace={trace}"] if trace else [])
    return _parse(_strace(kind, root, n, options))


_FSYNC_ON = re.compile(r"\b(?:fsync|fdatasync)\(\d+<([^>]*)>\)")


def _shape(path: str, root: Path) -> str:
    """A path with the parts that vary per call (object ids, temp names) blanked."""
    rel = path.removeprefix(str(root.resolve())).lstrip("/") or "."
    rel = re.sub(r"tmp_object_git2_\w+", "<tmp object>", rel)
    rel = re.sub(r"objects/[0-9a-f]{2}/[0-9a-f]{38,62}$", "objects/xx/<object>", rel)
    rel = re.sub(r"objects/[0-9a-f]{2}$", "objects/xx", rel)
    rel = re.sub(r"\.[\w-]+\.walt$", ".<tmp>.walt", rel)
    # One name per kind of file: a pack's name is its checksum, a target's
    # temp name carries the step's LSN.
    rel = re.sub(r"pack-[0-9a-f]{40}", "pack-<sha>", rel)
    rel = re.sub(r"\.w\d+\.<tmp>\.walt$", ".w<lsn>.<tmp>.walt", rel)
    rel = re.sub(r"refs/wal/[\w.-]+\.lock$", "refs/wal/<run>.lock", rel)
    return rel


def _fsync_paths(kind: str, root: Path, n: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    text = _strace(kind, root, n, ["-y", "-e", f"trace={FSYNCS}"])
    for m in _FSYNC_ON.finditer(text):
        key = _shape(m.group(1), root)
        counts[key] = counts.get(key, 0) + 1
    return counts


def per_op(
    setup: Callable[[Path], object] | None, kind: str, work: Path, n: int,
    trace: str | None = FSYNCS,
) -> dict[str, float]:
    """Syscalls per operation (difference of an ``n`` run and a ``0`` run, over ``n``).

    ``setup`` prepares a fresh directory for each traced process (e.g. a repo).
    ``trace``: a strace syscall list (counts by syscall), None for every
    syscall, or :data:`BY_PATH` for fsyncs counted by the path they sync.
    """
    results = []
    for count in (n, 0):
        root = Path(tempfile.mkdtemp(prefix=f"probe-{kind}-{count}-", dir=work))
        if setup is not None:
            setup(root)
        if trace == BY_PATH:
            results.append(_fsync_paths(kind, root, count))
        else:
            results.append(_traced(kind, root, count, trace))
        shutil.rmtree(root)
    full, empty = results
    names = set(full) | set(empty)
    return {k: (full.get(k, 0) - empty.get(k, 0)) / n for k in names}


def main() -> None:
    kind, root, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    op = KINDS[kind](root)
    for _ in range(n):
        op()


if __name__ == "__main__":
    main()
