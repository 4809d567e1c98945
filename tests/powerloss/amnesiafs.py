"""amnesiafs: a FUSE passthrough file system that forgets unsynced data at a
"power loss", the way LazyFS does ("When amnesia strikes", FAST '24).

``python -m tests.powerloss.amnesiafs BACKING MOUNT [options]`` mounts
BACKING at MOUNT:

* every metadata operation (create, mkdir, rmdir, unlink, rename, symlink,
  link, chmod, chown, utimens) goes to BACKING at once;
* file data (write, truncate, ``O_TRUNC``) is held in memory, per backing
  inode (hard links share it), until an ``fsync``/``fdatasync`` of that
  file writes the file's whole cached content back (pwrite, ftruncate,
  fsync). Reads and ``st_size`` see the cached content; close does not
  persist. ``syncfs(2)``/``sync(2)`` never reach a FUSE daemon: they persist
  nothing, as on any FUSE mount;
* a crash (a fault below, or ``crash`` on the control FIFO) drops every
  cached byte; from then on every operation fails with EIO and BACKING is
  never written again: it holds exactly what survived.

Faults (``--faults FILE``: a JSON object or a list of them; more can be armed
at run time with ``fault {json}`` on the control FIFO):

* ``{"at_op": N}``: crash as the N-th counted (mutating) operation begins;
* ``{"op": OP, "path_rgx": R, "from_rgx": R, "to_rgx": R, "nth": N,
  "when": "before"|"after"}``: crash before (or right after) the N-th (default
  1st) operation OP whose mount-relative path matches ``path_rgx`` (either
  path of a rename or link), whose source matches ``from_rgx`` and whose
  destination matches ``to_rgx`` (each optional). Each fault fires at most
  once; the first to fire crashes the file system.

Counted operations: write, truncate, create, mkdir, unlink, rmdir, rename,
symlink, link, fsync, fsyncdir, chmod.

Control (``--control FIFO``), one command a line: ``crash``; ``ops`` (answers
``ops N``); ``fault {json}`` (answers ``armed K``). Notifications
(``--notify PATH`` or ``--notify-fd FD``), one line each: ``ready`` once
mounted, ``crashed <reason> op=<n>`` at the crash. ``--stats FILE``: JSON
counts, written at the crash and at exit.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import mfusepy  # type: ignore[import-untyped]

COUNTED = ("write", "truncate", "create", "mkdir", "unlink", "rmdir", "rename", "symlink",
           "link", "fsync", "fsyncdir", "chmod")
# libfuse's encoding of utimensat's special values in a timespec's tv_nsec.
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
# How many paths with lost data the stats name.
LOST_PATHS_SHOWN = 100


def _rgx(spec: dict[str, Any], key: str) -> re.Pattern[str] | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"fault {spec}: {key} must be a string")
    return re.compile(value)


@dataclass
class Fault:
    """One crash trigger; fires at most once."""

    index: int
    spec: dict[str, Any]
    at_op: int | None = None
    op: str | None = None
    when: str = "before"
    path: re.Pattern[str] | None = None
    src: re.Pattern[str] | None = None
    dst: re.Pattern[str] | None = None
    nth: int = 1
    seen: int = 0
    fired: bool = False

    @classmethod
    def parse(cls, spec: dict[str, Any], index: int) -> Fault:
        known = {"at_op", "op", "when", "path_rgx", "from_rgx", "to_rgx", "nth"}
        if not isinstance(spec, dict) or set(spec) - known:
            raise ValueError(f"fault {spec!r}: keys are {sorted(known)}")
        if "at_op" in spec:
            if set(spec) != {"at_op"} or not isinstance(spec["at_op"], int) or spec["at_op"] < 1:
                raise ValueError(f"fault {spec!r}: at_op is a positive integer, alone")
            return cls(index, spec, at_op=spec["at_op"])
        op, when, nth = spec.get("op"), spec.get("when", "before"), spec.get("nth", 1)
        if op not in COUNTED:
            raise ValueError(f"fault {spec!r}: op must be one of {COUNTED}")
        if when not in ("before", "after"):
            raise ValueError(f"fault {spec!r}: when is 'before' or 'after'")
        if not isinstance(nth, int) or nth < 1:
            raise ValueError(f"fault {spec!r}: nth is a positive integer")
        return cls(index, spec, op=op, when=when, path=_rgx(spec, "path_rgx"),
                   src=_rgx(spec, "from_rgx"), dst=_rgx(spec, "to_rgx"), nth=nth)

    @property
    def reason(self) -> str:
        if self.at_op is not None:
            return f"at_op={self.at_op}"
        return f"fault{self.index}:{self.when}:{self.op}"

    def matches(self, op: str, paths: tuple[str, ...]) -> bool:
        if self.fired or self.at_op is not None or op != self.op:
            return False
        if self.path is not None and not any(self.path.search(p) for p in paths):
            return False
        if self.src is not None and not self.src.search(paths[0]):
            return False
        return self.dst is None or (len(paths) > 1 and self.dst.search(paths[1]) is not None)


@dataclass
class Entry:
    """The cached (unsynced) content of one backing inode."""

    data: bytearray
    mtime_ns: int
    path: str


@dataclass
class Opened:
    """A FUSE file handle: the backing file opened (read-write when it could be)."""

    fd: int
    ino: int
    path: str
    append: bool
    writable: bool


P = ParamSpec("P")
R = TypeVar("R")


def locked(fn: Callable[Concatenate[AmnesiaFS, P], R]) -> Callable[Concatenate[AmnesiaFS, P], R]:
    """Run a callback under the file system's lock; EIO once it crashed."""

    @functools.wraps(fn)
    def wrapper(self: AmnesiaFS, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.mutex:
            self.alive()
            return fn(self, *args, **kwargs)

    return wrapper


def eio() -> OSError:
    err: OSError = mfusepy.FuseOSError(errno.EIO)
    return err


class Notifier:
    """Writes notification lines to a pipe, FIFO or file (never blocks the
    caller for long: a line is far below PIPE_BUF)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def __call__(self, line: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (line + "\n").encode())
        except OSError:
            pass  # the harness is gone: nobody to tell


class AmnesiaFS(mfusepy.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, backing: str, faults: list[dict[str, Any]], notify: Callable[[str], None],
                 stats_path: str | None = None) -> None:
        self.root = os.path.realpath(backing)
        # Not `lock`: mfusepy would take that for the FUSE lock operation.
        self.mutex = threading.Lock()
        self.notify = notify
        self.stats_path = stats_path
        self.faults = [Fault.parse(spec, i) for i, spec in enumerate(faults)]
        self.cache: dict[int, Entry] = {}
        self.handles: dict[int, Opened] = {}
        self.ops = 0
        self.counts = dict.fromkeys(COUNTED, 0)
        self.written_back = 0
        self.crash_info: dict[str, Any] | None = None

    # -- bookkeeping ------------------------------------------------------------------

    def alive(self) -> None:
        if self.crash_info is not None:
            raise eio()

    def _b(self, path: str) -> str:
        return self.root if path == "/" else self.root + path

    def begin(self, op: str, *paths: str) -> None:
        """A counted operation begins: count it, and crash first if a fault says so."""
        self.ops += 1
        self.counts[op] += 1
        for fault in self.faults:
            if fault.fired:
                continue
            if fault.at_op is not None and fault.at_op == self.ops:
                self.fire(fault)
            if fault.when == "before" and fault.matches(op, paths):
                fault.seen += 1
                if fault.seen == fault.nth:
                    self.fire(fault)

    def end(self, op: str, *paths: str) -> None:
        """A counted operation was done: crash now if an ``after`` fault says so
        (the operation itself succeeded, as a write the disk took before the
        power went)."""
        for fault in self.faults:
            if fault.when == "after" and fault.matches(op, paths):
                fault.seen += 1
                if fault.seen == fault.nth:
                    fault.fired = True
                    self.crash(fault.reason)
                    return

    def fire(self, fault: Fault) -> None:
        fault.fired = True
        self.crash(fault.reason)
        raise eio()

    def arm(self, spec: dict[str, Any]) -> int:
        fault = Fault.parse(spec, len(self.faults))
        self.faults.append(fault)
        return fault.index

    def crash(self, reason: str) -> None:
        """The power goes: drop every cached byte; nothing is written after this.
        Call with the lock held."""
        if self.crash_info is not None:
            return
        lost = sorted(self.cache.values(), key=lambda e: e.path)
        self.crash_info = {
            "reason": reason, "op": self.ops,
            "unsynced_bytes": sum(len(e.data) for e in lost),
            "unsynced_files": len(lost),
            "unsynced_paths": [e.path for e in lost][:LOST_PATHS_SHOWN],
        }
        self.cache.clear()
        for h in self.handles.values():
            try:
                os.close(h.fd)
            except OSError:
                pass
        self.handles.clear()
        self.write_stats()
        self.notify(f"crashed {reason} op={self.ops}")

    def stats(self) -> dict[str, Any]:
        return {
            "ops": self.ops, "counts": dict(self.counts), "fsyncs": self.counts["fsync"],
            "fsyncdirs": self.counts["fsyncdir"], "written_back": self.written_back,
            "crashed": self.crash_info is not None, "crash": self.crash_info,
            "unsynced_bytes_at_crash": (self.crash_info or {}).get("unsynced_bytes", 0),
            "unsynced_files_at_crash": (self.crash_info or {}).get("unsynced_files", 0),
            "unsynced_bytes_now": sum(len(e.data) for e in self.cache.values()),
            "faults": [{"spec": f.spec, "fired": f.fired, "seen": f.seen} for f in self.faults],
        }

    def write_stats(self) -> None:
        if self.stats_path is None:
            return
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats(), f, indent=1, sort_keys=True)
        os.replace(tmp, self.stats_path)

    def entry(self, ino: int, fd: int, path: str) -> Entry:
        """The cached content of ``ino``, read from the backing file ``fd`` the
        first time."""
        e = self.cache.get(ino)
        if e is None:
            st = os.fstat(fd)
            data = bytearray()
            while len(data) < st.st_size:
                chunk = os.pread(fd, st.st_size - len(data), len(data))
                if not chunk:
                    break
                data += chunk
            e = self.cache[ino] = Entry(data, st.st_mtime_ns, path)
        e.path = path
        return e

    def touch(self, e: Entry) -> None:
        e.mtime_ns = time.time_ns()

    def is_open(self, ino: int) -> bool:
        return any(h.ino == ino for h in self.handles.values())

    def forget_if_freed(self, st: os.stat_result | None) -> None:
        """After an unlink or a rename over ``st`` (the victim, lstat before):
        its cached data goes once its inode is gone (no link, not open)."""
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            return
        if not self.is_open(st.st_ino):
            self.cache.pop(st.st_ino, None)

    def _lstat(self, path: str) -> os.stat_result | None:
        try:
            return os.lstat(self._b(path))
        except OSError:
            return None

    def register(self, fd: int, path: str, flags: int, writable: bool) -> int:
        ino = os.fstat(fd).st_ino
        self.handles[fd] = Opened(fd, ino, path, bool(flags & os.O_APPEND), writable)
        return fd

    def open_backing(self, path: str, extra: int = 0, mode: int = 0o666) -> tuple[int, bool]:
        """Open the backing file read-write (so that an fsync can write it back),
        read-only when that is refused."""
        b = self._b(path)
        try:
            return os.open(b, os.O_RDWR | os.O_CLOEXEC | extra, mode), True
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY,
                               errno.EISDIR):
                raise
        return os.open(b, os.O_RDONLY | os.O_CLOEXEC | extra, mode), False

    def write_back(self, h: Opened) -> None:
        """fsync: the inode's cached content goes to the backing file, durably."""
        e = self.cache.pop(h.ino, None)
        if e is None:
            return
        fd = h.fd if h.writable else os.open(f"/proc/self/fd/{h.fd}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            view = memoryview(e.data)
            done = 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], done)
            os.ftruncate(fd, len(e.data))
            st = os.fstat(fd)
            os.utime(fd, ns=(st.st_atime_ns, e.mtime_ns))
            os.fsync(fd)
        finally:
            if fd != h.fd:
                os.close(fd)
        self.written_back += 1

    # -- FUSE callbacks -----------------------------------------------------------------

    def init(self, path: str) -> None:
        self.notify("ready")

    @locked
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        if fh is not None and fh in self.handles:
            st = os.fstat(self.handles[fh].fd)
        elif path is not None:
            st = os.lstat(self._b(path))
        else:
            raise mfusepy.FuseOSError(errno.EBADF)
        attrs: dict[str, Any] = {
            key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_uid", "st_gid",
                                              "st_size", "st_ino", "st_rdev", "st_blocks",
                                              "st_blksize")
        }
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        e = self.cache.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
        if e is not None:
            attrs.update(st_size=len(e.data), st_blocks=(len(e.data) + 511) // 512,
                         st_mtime=e.mtime_ns, st_ctime=max(e.mtime_ns, st.st_ctime_ns))
        return attrs

    @locked
    def readlink(self, path: str) -> str:
        return os.readlink(self._b(path))

    @locked
    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._b(path))]

    @locked
    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._b(path))
        return {key: getattr(sv, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
            "f_favail", "f_flag", "f_namemax")}

    @locked
    def access(self, path: str, amode: int) -> int:
        if not os.access(self._b(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    @locked
    def mkdir(self, path: str, mode: int) -> int:
        self.begin("mkdir", path)
        os.mkdir(self._b(path), mode)
        self.end("mkdir", path)
        return 0

    @locked
    def rmdir(self, path: str) -> int:
        self.begin("rmdir", path)
        os.rmdir(self._b(path))
        self.end("rmdir", path)
        return 0

    @locked
    def unlink(self, path: str) -> int:
        self.begin("unlink", path)
        victim = self._lstat(path)
        os.unlink(self._b(path))
        self.forget_if_freed(victim)
        self.end("unlink", path)
        return 0

    @locked
    def rename(self, old: str, new: str, flags: int = 0) -> int:
        self.begin("rename", old, new)
        if flags:
            raise mfusepy.FuseOSError(errno.EINVAL)  # RENAME_NOREPLACE/EXCHANGE: callers fall back
        moved, victim = self._lstat(old), self._lstat(new)
        os.rename(self._b(old), self._b(new))
        if victim is not None and moved is not None and victim.st_ino != moved.st_ino:
            self.forget_if_freed(victim)
        if moved is not None and moved.st_ino in self.cache:
            self.cache[moved.st_ino].path = new
        self.end("rename", old, new)
        return 0

    @locked
    def symlink(self, target: str, source: str) -> int:
        """The link ``target`` (a mount path) pointing to ``source``."""
        self.begin("symlink", target)
        os.symlink(source, self._b(target))
        self.end("symlink", target)
        return 0

    @locked
    def link(self, target: str, source: str) -> int:
        """The hard link ``target`` of the existing ``source``."""
        self.begin("link", source, target)
        os.link(self._b(source), self._b(target), follow_symlinks=False)
        self.end("link", source, target)
        return 0

    @locked
    def chmod(self, path: str | None, mode: int, fh: int | None = None) -> int:
        h = self.handles.get(fh) if fh is not None else None
        self.begin("chmod", path or (h.path if h else "?"))
        if path is not None:
            os.chmod(self._b(path), mode)
        elif h is not None:
            os.fchmod(h.fd, mode)
        else:
            raise mfusepy.FuseOSError(errno.EBADF)
        self.end("chmod", path or (h.path if h else "?"))
        return 0

    @locked
    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._b(path), uid, gid, follow_symlinks=False)
        return 0

    @locked
    def utimens(self, path: str | None, times: tuple[int | None, int | None] | None = None,
                fh: int | None = None) -> int:
        h = self.handles.get(fh) if fh is not None else None
        target: int | str
        if path is not None:
            target = self._b(path)
            st = os.lstat(target)
        elif h is not None:
            target = h.fd
            st = os.fstat(h.fd)
        else:
            raise mfusepy.FuseOSError(errno.EBADF)
        e = self.cache.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
        now = time.time_ns()
        atime, mtime = times if times is not None else (now, now)
        atime = st.st_atime_ns if atime is None else atime
        mtime = (e.mtime_ns if e is not None else st.st_mtime_ns) if mtime is None else mtime
        if isinstance(target, int):
            os.utime(target, ns=(atime, mtime))
        else:
            os.utime(target, ns=(atime, mtime), follow_symlinks=False)
        if e is not None:
            e.mtime_ns = mtime
        return 0

    @locked
    def open(self, path: str, flags: int) -> int:
        trunc = bool(flags & os.O_TRUNC) and (flags & os.O_ACCMODE) != os.O_RDONLY
        if trunc:
            self.begin("truncate", path)
        fd, writable = self.open_backing(path)
        fh = self.register(fd, path, flags, writable)
        if trunc:
            e = self.entry(self.handles[fh].ino, fd, path)
            del e.data[:]
            self.touch(e)
            self.end("truncate", path)
        return fh

    @locked
    def create(self, path: str, mode: int, flags: int) -> int:
        self.begin("create", path)
        existed = self._lstat(path) is not None
        fd, writable = self.open_backing(path, os.O_CREAT | (flags & os.O_EXCL), mode)
        st = os.fstat(fd)
        if not existed:
            self.cache.pop(st.st_ino, None)  # a new inode: nothing can be cached for it
        fh = self.register(fd, path, flags, writable)
        if flags & os.O_TRUNC and st.st_ino in self.cache:
            e = self.entry(st.st_ino, fd, path)
            del e.data[:]
            self.touch(e)
        self.end("create", path)
        return fh

    @locked
    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        h = self.handles[fh]
        e = self.cache.get(h.ino)
        if e is not None:
            return bytes(e.data[offset:offset + size])
        return os.pread(h.fd, size, offset)

    @locked
    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        h = self.handles[fh]
        p = path or h.path
        self.begin("write", p)
        e = self.entry(h.ino, h.fd, p)
        if h.append:
            offset = len(e.data)
        if offset > len(e.data):
            e.data.extend(bytes(offset - len(e.data)))
        e.data[offset:offset + len(data)] = data
        self.touch(e)
        self.end("write", p)
        return len(data)

    @locked
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        h = self.handles.get(fh) if fh is not None else None
        p = path if path is not None else (h.path if h else "?")
        self.begin("truncate", p)
        if h is not None:
            e = self.entry(h.ino, h.fd, p)
        elif path is not None:
            fd = os.open(self._b(path), os.O_RDONLY | os.O_CLOEXEC)
            try:
                e = self.entry(os.fstat(fd).st_ino, fd, p)
            finally:
                os.close(fd)
        else:
            raise mfusepy.FuseOSError(errno.EBADF)
        if length < len(e.data):
            del e.data[length:]
        else:
            e.data.extend(bytes(length - len(e.data)))
        self.touch(e)
        self.end("truncate", p)
        return 0

    @locked
    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close(2) persists nothing

    @locked
    def release(self, path: str | None, fh: int) -> int:
        h = self.handles.pop(fh, None)
        if h is None:
            return 0
        try:
            nlink = os.fstat(h.fd).st_nlink
        finally:
            os.close(h.fd)
        if nlink == 0 and not self.is_open(h.ino):
            self.cache.pop(h.ino, None)
        return 0

    @locked
    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        h = self.handles[fh]
        p = path or h.path
        self.begin("fsync", p)
        self.write_back(h)
        self.end("fsync", p)
        return 0

    @locked
    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        p = path or "?"
        self.begin("fsyncdir", p)
        self.end("fsyncdir", p)
        return 0


class AmnesiaFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE, passing what its libfuse 3 wrappers drop: the file handle
    of chmod/truncate/utimens (a file unlinked while open has no path), the
    flags of rename, and utimensat's UTIME_NOW/UTIME_OMIT."""

    def _path(self, path: bytes | None) -> str | None:
        return None if path is None else path.decode(self.encoding, self.errors)

    @staticmethod
    def _fh(fip: Any) -> int | None:
        return int(fip.contents.fh) if fip else None

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        result: int = self.operations.rename(self._path(old), self._path(new), flags)
        return result

    def chmod_fuse_3(self, path: bytes | None, mode: int, fip: Any) -> int:
        result: int = self.operations.chmod(self._path(path), mode, self._fh(fip))
        return result

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        result: int = self.operations.truncate(self._path(path), length, self._fh(fip))
        return result

    def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        times: tuple[int | None, int | None] | None = None
        if buf:
            now = time.time_ns()

            def ns(ts: Any) -> int | None:
                if ts.tv_nsec == UTIME_OMIT:
                    return None
                if ts.tv_nsec == UTIME_NOW:
                    return now
                return int(ts.tv_sec) * 10**9 + int(ts.tv_nsec)

            times = (ns(buf.contents.actime), ns(buf.contents.modtime))
        result: int = self.operations.utimens(self._path(path), times, self._fh(fip))
        return result


def control_loop(fs: AmnesiaFS, path: str) -> None:
    """Serve the control FIFO: opened read-write, so it never sees EOF and its
    opening never waits for a writer."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    pending = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            raw, pending = pending.split(b"\n", 1)
            command(fs, raw.decode().strip())


def command(fs: AmnesiaFS, line: str) -> None:
    word, _, rest = line.partition(" ")
    with fs.mutex:
        if word == "crash":
            fs.crash("control")
        elif word == "ops":
            fs.notify(f"ops {fs.ops}")
        elif word == "fault":
            try:
                fs.notify(f"armed {fs.arm(json.loads(rest))}")
            except ValueError as e:
                fs.notify(f"error {e}".replace("\n", " "))
        elif word:
            fs.notify(f"error unknown command {word!r}")


def load_faults(path: str | None) -> list[dict[str, Any]]:
    if path is None:
        return []
    with open(path) as f:
        data = json.load(f)
    return data if isinstance(data, list) else [data]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.powerloss.amnesiafs",
                                 description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("backing")
    ap.add_argument("mount")
    ap.add_argument("--faults", help="JSON file: a fault object or a list of them")
    ap.add_argument("--control", help="FIFO the harness writes commands to")
    ap.add_argument("--notify", help="FIFO or file the notifications are written to")
    ap.add_argument("--notify-fd", type=int, help="inherited fd the notifications go to")
    ap.add_argument("--stats", help="JSON file written at the crash and at exit")
    ap.add_argument("--debug", action="store_true", help="libfuse's debug output on stderr")
    args = ap.parse_args(argv)
    faults = load_faults(args.faults)
    if args.notify_fd is not None:
        notify_fd: int | None = args.notify_fd
    elif args.notify is not None:
        notify_fd = os.open(args.notify, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                            0o600)
    else:
        notify_fd = None
    os.umask(0)  # the kernel applied the caller's umask to every mode we are given
    fs = AmnesiaFS(args.backing, faults, Notifier(notify_fd), args.stats)
    if args.control:
        threading.Thread(target=control_loop, args=(fs, args.control), daemon=True).start()
    try:
        AmnesiaFUSE(fs, os.path.realpath(args.mount), foreground=True, nothreads=True,
                    hard_remove=True, default_permissions=True, fsname="amnesiafs",
                    debug=args.debug)
    finally:
        with fs.mutex:
            fs.write_stats()
    return 0


if __name__ == "__main__":
    sys.exit(main())
