"""Mount amnesiafs for a test and always take it down again: :func:`mounted`.

Every blocking call here has a timeout: a FUSE mount whose daemon hangs
freezes whatever touches it, the test process included.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the checkout: `python -m tests.powerloss...` runs here
# Read at import: the tests' sealed environment drops every GITWAL_* variable.
REQUIRE = os.environ.get("GITWAL_POWERLOSS_REQUIRE") == "1"
READY_TIMEOUT = 60.0
STEP_TIMEOUT = 30.0


@functools.cache
def unavailable() -> str | None:
    """Why amnesiafs cannot run here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse in this environment"
    try:
        probe = subprocess.run([sys.executable, "-c", "import mfusepy"], capture_output=True,
                               text=True, timeout=READY_TIMEOUT)
    except subprocess.TimeoutExpired:
        return "importing mfusepy did not finish"
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"mfusepy cannot load libfuse3: {last}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "no fusermount3 to mount FUSE file systems as a user"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, unless GITWAL_POWERLOSS_REQUIRE=1 says these tests must run."""
    if REQUIRE:
        pytest.fail(f"GITWAL_POWERLOSS_REQUIRE=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_fuse() -> None:
    reason = unavailable()
    if reason is not None:
        skip_or_fail(reason)


def _unescape(field: str) -> str:
    """A mount point as /proc/self/mountinfo writes it (octal escapes)."""
    out, i = bytearray(), 0
    raw = field.encode()
    while i < len(raw):
        if raw[i:i + 1] == b"\\" and raw[i + 1:i + 4].isdigit():
            out.append(int(raw[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return os.fsdecode(bytes(out))


def is_mounted(mount: Path) -> bool:
    """Whether something is mounted at ``mount`` (read from the mount table:
    never a stat, which a hung mount would block)."""
    with open("/proc/self/mountinfo") as f:
        return any(_unescape(line.split()[4]) == str(mount) for line in f if line.strip())


def unmount(mount: Path) -> None:
    """Unmount ``mount``, lazily if a plain unmount does not do it."""
    for argv in (["fusermount3", "-u"], ["umount"], ["fusermount3", "-uz"], ["umount", "-l"]):
        if not is_mounted(mount):
            return
        if shutil.which(argv[0]) is None:
            continue
        try:
            subprocess.run([*argv, str(mount)], capture_output=True, timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            continue
    if is_mounted(mount):
        raise AssertionError(f"could not unmount {mount}")


class Handle:
    """A running amnesiafs daemon: commands go to its control FIFO, its
    notifications come back on a pipe."""

    def __init__(self, backing: Path, mount: Path, proc: subprocess.Popen[bytes],
                 control: int, notify: int, work: Path) -> None:
        self.backing, self.mount, self.proc = backing, mount, proc
        self.control, self.notify, self.work = control, notify, work
        self.pending = b""
        self.eof = False
        self.crashed: str | None = None  # the daemon's `crashed ...` line, once seen

    @property
    def stats_path(self) -> Path:
        return self.work / "stats.json"

    def stderr(self) -> str:
        try:
            return (self.work / "stderr").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def send(self, line: str) -> None:
        os.write(self.control, (line + "\n").encode())

    def _next_line(self, deadline: float) -> str | None:
        """The next notification line; None at EOF (the daemon is gone) or
        when ``deadline`` (time.monotonic) passed."""
        while b"\n" not in self.pending:
            if self.eof:
                return None
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.notify], [], [], max(0.0, left))
            if not ready:
                return None
            chunk = os.read(self.notify, 4096)
            if not chunk:
                self.eof = True
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        text = line.decode()
        if text.startswith("crashed ") and self.crashed is None:
            self.crashed = text
        return text

    def _expect(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self._next_line(deadline)
            if line is None:
                why = "exited" if self.eof else f"said nothing for {timeout} s"
                raise AssertionError(f"amnesiafs {why} while a {prefix!r} line was awaited; "
                                     f"stderr:\n{self.stderr()[-4000:]}")
            if line.startswith("error "):
                raise AssertionError(f"amnesiafs: {line}")
            if line.startswith(prefix):
                return line

    def poll_crashed(self) -> str | None:
        """The crash line if the daemon reported one by now (never waits)."""
        while self.crashed is None and self._next_line(time.monotonic()) is not None:
            pass
        return self.crashed

    def crash(self) -> None:
        """Cut the power now (a no-op when a fault cut it already)."""
        self.send("crash")

    def wait_crashed(self, timeout: float = READY_TIMEOUT) -> str:
        """Wait for the daemon's ``crashed <reason> op=<n>`` line; return it."""
        if self.crashed is None:
            self._expect("crashed ", timeout)
        assert self.crashed is not None
        return self.crashed

    def ops(self, timeout: float = STEP_TIMEOUT) -> int:
        """How many counted operations the file system has seen."""
        self.send("ops")
        return int(self._expect("ops ", timeout).split()[1])

    def arm(self, fault: dict[str, Any], timeout: float = STEP_TIMEOUT) -> None:
        """Add a fault; returns once the daemon has it."""
        self.send("fault " + json.dumps(fault))
        self._expect("armed ", timeout)

    def stats(self) -> dict[str, Any]:
        """The daemon's counters (final once the mount was taken down)."""
        data: dict[str, Any] = json.loads(self.stats_path.read_text())
        return data

    def close(self) -> None:
        """Unmount, then stop and reap the daemon, whatever state it is in."""
        try:
            unmount(self.mount)
        finally:
            try:
                self.proc.wait(timeout=STEP_TIMEOUT)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=STEP_TIMEOUT)
            finally:
                for fd in (self.control, self.notify):
                    os.close(fd)
            if is_mounted(self.mount):  # the daemon died first: only a lazy unmount is left
                unmount(self.mount)


@contextmanager
def mounted(backing: Path, mount: Path, faults: list[dict[str, Any]] | None = None,
            ready_timeout: float = READY_TIMEOUT) -> Iterator[Handle]:
    """amnesiafs serving ``backing`` at ``mount`` (an empty directory of the
    test's own, created if missing) with ``faults`` armed from the start.
    Skips (or fails, GITWAL_POWERLOSS_REQUIRE=1) where FUSE cannot run."""
    require_fuse()
    backing = Path(os.path.realpath(backing))
    mount.mkdir(parents=True, exist_ok=True)
    mount = Path(os.path.realpath(mount.parent)) / mount.name  # no stat inside the mount
    assert not is_mounted(mount) and not any(mount.iterdir()), f"{mount}: not an empty directory"
    backing.mkdir(parents=True, exist_ok=True)
    work = mount.parent / f".{mount.name}.amnesiafs"
    work.mkdir()
    fifo = work / "control"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "tests.powerloss.amnesiafs", str(backing), str(mount),
            "--control", str(fifo), "--stats", str(work / "stats.json")]
    if faults:
        (work / "faults.json").write_text(json.dumps(faults))
        argv += ["--faults", str(work / "faults.json")]
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, False)
    try:
        with open(work / "stderr", "wb") as err:
            proc = subprocess.Popen([*argv, "--notify-fd", str(write_end)], cwd=ROOT,
                                    stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                    pass_fds=(write_end,), start_new_session=True)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    control = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)  # never blocks, even if the daemon died
    handle = Handle(backing, mount, proc, control, read_end, work)
    try:
        deadline = time.monotonic() + ready_timeout
        line = handle._next_line(deadline)
        while line is not None and line != "ready":
            line = handle._next_line(deadline)
        if line is None:
            err_text = handle.stderr()
            if any(w in err_text for w in ("Operation not permitted", "Permission denied")):
                skip_or_fail(f"cannot mount a FUSE file system here: {err_text.strip()[-500:]}")
            raise AssertionError(f"amnesiafs did not mount {mount} within {ready_timeout} s; "
                                 f"stderr:\n{err_text[-4000:]}")
        yield handle
    finally:
        handle.close()
