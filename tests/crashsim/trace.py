"""Record a workload under strace and turn the trace into logical operations.

The trace is taken with ``-f`` (children: git, sh), ``-y`` (every descriptor
annotated with its path, ``AT_FDCWD`` with the working directory), ``-xx``
(every string hex-escaped, so written bytes and odd paths survive) and
``-s 65536`` (whole buffers). Only operations on paths inside the repository
directory are kept. Descriptors are followed through ``dup``/``fcntl``/fork
so that ``sh -c 'printf x > f'`` (open, dup2 to 1, write 1) is attributed to
``f``, with file positions (``lseek``, ``O_APPEND``).

The result is checked against the disk: replaying every operation over the
initial snapshot must give exactly the directory the run left
(:func:`fidelity_errors`), so a syscall this parser misreads shows up as a
test failure, not as a silently wrong crash state.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .image import Image
from .ops import (
    Chmod,
    Create,
    Fsync,
    InodeId,
    Kind,
    Link,
    NewInode,
    Op,
    Rename,
    SyncAll,
    Truncate,
    Unlink,
    Write,
    Writeback,
)

SYSCALLS = (
    "openat", "open", "creat", "write", "pwrite64", "writev", "pwritev", "pwritev2",
    "rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat", "mkdir",
    "mkdirat", "rmdir", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync",
    "sync_file_range", "syncfs", "sync", "close", "fchmod", "fchmodat", "chmod",
    "symlink", "symlinkat", "lseek", "dup", "dup2", "dup3", "fcntl", "clone", "clone3",
    "fork", "vfork", "chdir", "fchdir",
)


def strace_command(out: Path) -> list[str]:
    """The strace prefix for a traced run (``-yy`` is not used: socket
    annotations may contain ``>``, and nothing here needs them)."""
    return ["strace", "-f", "-qq", "-tt", "-y", "-s", "65536", "-xx",
            "-e", "trace=" + ",".join(SYSCALLS), "-o", str(out)]


class TraceError(Exception):
    """The trace holds something this parser does not model."""


# -- lexical level ---------------------------------------------------------------

_LINE = re.compile(r"(\d+)\s+\d\d:\d\d:\d\d\.\d+\s+(.*)")
_RESUMED = re.compile(r"<\.\.\. (\w+) resumed>(.*)")
_UNFINISHED = " <unfinished ...>"
_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "\\": 92, '"': 34}


def unescape(text: str) -> bytes:
    """strace's C-style escaping (``-xx``: every byte as ``\\xNN``) to bytes."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "x":
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        elif nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt.isdigit():
            j = i + 1
            while j < len(text) and j < i + 4 and text[j] in "01234567":
                j += 1
            out.append(int(text[i + 1 : j], 8))
            i = j
        else:
            out += nxt.encode()
            i += 2
    return bytes(out)


def _scan(text: str, start: int, stop: str) -> int:
    """Index of the first ``stop`` character at nesting depth 0 from ``start``."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            if depth == 0 and c in stop:
                return i
            depth -= 1
        elif c in stop and depth == 0:
            return i
        i += 1
    return len(text)


def split_args(text: str) -> list[str]:
    args: list[str] = []
    i = 0
    while i < len(text):
        j = _scan(text, i, ",")
        args.append(text[i:j].strip())
        i = j + 1
    return args


@dataclass(frozen=True)
class Syscall:
    line: int
    pid: int
    name: str
    args: list[str]
    ret: str  # the text after "= ", "" when there is none

    @property
    def failed(self) -> bool:
        return self.ret.startswith(("-1 ", "?"))

    @property
    def value(self) -> int:
        m = re.match(r"-?\d+|0x[0-9a-f]+", self.ret)
        if m is None:
            raise TraceError(f"line {self.line}: no return value in {self.ret!r}")
        return int(m.group(0), 0)

    @property
    def ret_path(self) -> str | None:
        return annotation(self.ret)


def annotation(arg: str) -> str | None:
    """The path in ``3</path>`` / ``AT_FDCWD</path>`` (None: no path annotation)."""
    m = re.match(r"[^<]*<(.*)>", arg)
    if m is None or m.group(1).startswith(("pipe:", "socket:", "anon_inode:")):
        return None
    path = os.fsdecode(unescape(m.group(1)))
    return path.removesuffix(" (deleted)")


def fd_number(arg: str) -> int:
    m = re.match(r"-?\d+", arg)
    if m is None:
        raise TraceError(f"not a descriptor: {arg!r}")
    return int(m.group(0))


def string_arg(arg: str) -> bytes:
    if not arg.startswith('"'):
        raise TraceError(f"not a string: {arg[:60]!r}")
    close = arg.rindex('"')
    if arg[close + 1 :].startswith("..."):
        raise TraceError("a buffer was truncated by strace (raise -s)")
    return unescape(arg[1:close])


def parse(lines: Iterable[str]) -> Iterator[Syscall]:
    """Complete syscalls in the order they returned (unfinished ones are
    joined with their ``resumed`` half)."""
    pending: dict[int, str] = {}
    for n, raw in enumerate(lines, start=1):
        m = _LINE.match(raw.rstrip("\n"))
        if m is None:
            continue
        pid, rest = int(m.group(1)), m.group(2)
        if rest.startswith(("+++", "---")):
            continue
        r = _RESUMED.match(rest)
        if r is not None:
            rest = pending.pop(pid, r.group(1) + "(") + r.group(2)
        if rest.endswith(_UNFINISHED):
            pending[pid] = rest[: -len(_UNFINISHED)]
            continue
        paren = rest.index("(")
        close = _scan(rest, paren + 1, ")")
        tail = rest[close + 1 :].strip()
        ret = tail[1:].strip() if tail.startswith("=") else ""
        yield Syscall(n, pid, rest[:paren], split_args(rest[paren + 1 : close]), ret)


# -- semantic level --------------------------------------------------------------


@dataclass
class OpenFile:
    """An open file description (shared by dup'ed and inherited descriptors)."""

    path: str  # absolute, as opened
    ino: InodeId | None  # None: outside the repository
    pos: int = 0
    append: bool = False


@dataclass
class Process:
    fds: dict[int, OpenFile]
    cwd: str | None


@dataclass
class Trace:
    """The operations of one run, in order, plus what they need to replay."""

    ops: list[Op]
    new_inodes: dict[InodeId, NewInode]
    root: str

    def image(self, snapshot: Path) -> Image:
        return Image(snapshot, self.new_inodes)


@dataclass
class _Converter:
    root: str
    snapshot: Path
    umask: int
    ops: list[Op] = field(default_factory=list)
    new_inodes: dict[InodeId, NewInode] = field(default_factory=dict)
    procs: dict[int, Process] = field(default_factory=dict)
    parents: dict[int, tuple[int, bool]] = field(default_factory=dict)
    image: Image = field(init=False)

    def __post_init__(self) -> None:
        self.image = Image(self.snapshot, self.new_inodes)

    # -- paths -------------------------------------------------------------

    def rel(self, path: str) -> str | None:
        path = posixpath.normpath(path)
        if path == self.root:
            return ""
        if path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return None

    def resolve(self, sc: Syscall, proc: Process, dirfd: str | None, raw: str) -> str:
        path = os.fsdecode(string_arg(raw))
        if path.startswith("/"):
            return posixpath.normpath(path)
        base = proc.cwd if dirfd is None else annotation(dirfd)
        if base is None:
            raise TraceError(f"line {sc.line}: relative path {path!r} with unknown base")
        return posixpath.normpath(posixpath.join(base, path))

    def split(self, sc: Syscall, rel: str) -> tuple[InodeId, str]:
        parent = self.image.lookup(posixpath.dirname(rel))
        if parent is None:
            raise TraceError(f"line {sc.line}: parent of {rel} does not exist")
        return parent, posixpath.basename(rel)

    def must(self, sc: Syscall, rel: str) -> InodeId:
        ino = self.image.lookup(rel)
        if ino is None:
            raise TraceError(f"line {sc.line}: {rel} does not exist in the model")
        return ino

    # -- processes and descriptors -----------------------------------------

    def process(self, pid: int) -> Process:
        proc = self.procs.get(pid)
        if proc is not None:
            return proc
        parent = self.parents.get(pid)
        if parent is None or parent[0] not in self.procs:
            proc = Process({}, None)
        else:
            ppid, share_files = parent
            pp = self.procs[ppid]
            proc = Process(pp.fds if share_files else dict(pp.fds), pp.cwd)
        self.procs[pid] = proc
        return proc

    def fd(self, sc: Syscall, proc: Process, arg: str) -> OpenFile | None:
        """The open file behind a descriptor argument, if it is in the repository."""
        of = proc.fds.get(fd_number(arg))
        if of is None:
            path = annotation(arg)
            if path is not None and self.rel(path) is not None:
                raise TraceError(f"line {sc.line}: {sc.name} on an untracked descriptor "
                                 f"of {path}")
            return None
        return of if of.ino is not None else None

    def emit(self, op: Op) -> None:
        self.ops.append(op)
        self.image.apply(op)

    def new_inode(self, kind: Kind, mode: int, target: bytes = b"") -> InodeId:
        ino = f"n:{len(self.new_inodes)}"
        self.new_inodes[ino] = NewInode(kind, mode & ~self.umask & 0o7777, target)
        return ino

    # -- syscalls ------------------------------------------------------------

    def handle(self, sc: Syscall) -> None:
        proc = self.process(sc.pid)
        for arg in sc.args[:1]:
            if arg.startswith("AT_FDCWD<"):
                proc.cwd = annotation(arg)
        if sc.failed:
            return
        handler = getattr(self, "sys_" + sc.name, None)
        if handler is None:
            raise TraceError(f"line {sc.line}: no handler for {sc.name}")
        handler(sc, proc)

    def sys_openat(self, sc: Syscall, proc: Process) -> None:
        self._open(sc, proc, sc.args[0], sc.args[1], sc.args[2], sc.args[3:])

    def sys_open(self, sc: Syscall, proc: Process) -> None:
        self._open(sc, proc, None, sc.args[0], sc.args[1], sc.args[2:])

    def sys_creat(self, sc: Syscall, proc: Process) -> None:
        self._open(sc, proc, None, sc.args[0], "O_WRONLY|O_CREAT|O_TRUNC", sc.args[1:])

    def _open(self, sc: Syscall, proc: Process, dirfd: str | None, raw: str, flags: str,
              rest: Sequence[str]) -> None:
        path = sc.ret_path or self.resolve(sc, proc, dirfd, raw)
        rel = self.rel(path)
        fd = sc.value
        if rel is None:
            proc.fds[fd] = OpenFile(path, None)
            return
        ino = self.image.lookup(rel)
        if ino is None:
            if "O_CREAT" not in flags:
                raise TraceError(f"line {sc.line}: opened {rel}, which the model lacks")
            parent, name = self.split(sc, rel)
            ino = self.new_inode("file", int(rest[0], 8) if rest else 0o666)
            self.emit(Create(rel, sc.line, parent, name, ino, "file"))
        elif (re.search(r"O_TRUNC", flags) and re.search(r"O_WRONLY|O_RDWR", flags)
              and self.image.node(ino).kind == "file" and self.image.data(ino)):
            self.emit(Truncate(rel, sc.line, ino, 0))
        proc.fds[fd] = OpenFile(path, ino, 0, "O_APPEND" in flags)

    def sys_close(self, sc: Syscall, proc: Process) -> None:
        proc.fds.pop(fd_number(sc.args[0]), None)

    def _dup(self, proc: Process, old: str, new: int) -> None:
        of = proc.fds.get(fd_number(old))
        if of is None:
            proc.fds.pop(new, None)
        else:
            proc.fds[new] = of

    def sys_dup(self, sc: Syscall, proc: Process) -> None:
        self._dup(proc, sc.args[0], sc.value)

    def sys_dup2(self, sc: Syscall, proc: Process) -> None:
        self._dup(proc, sc.args[0], sc.value)

    sys_dup3 = sys_dup2

    def sys_fcntl(self, sc: Syscall, proc: Process) -> None:
        if sc.args[1].startswith("F_DUPFD"):
            self._dup(proc, sc.args[0], sc.value)

    def sys_lseek(self, sc: Syscall, proc: Process) -> None:
        of = proc.fds.get(fd_number(sc.args[0]))
        if of is not None:
            of.pos = sc.value

    def _write(self, sc: Syscall, proc: Process, data: bytes, offset: int | None) -> None:
        of = self.fd(sc, proc, sc.args[0])
        if of is None or of.ino is None:
            return
        data = data[: sc.value]
        if offset is None:
            at = len(self.image.data(of.ino)) if of.append else of.pos
            of.pos = at + len(data)
        else:
            at = offset
        rel = self.rel(of.path) or ""
        if data:
            self.emit(Write(rel, sc.line, of.ino, at, data))

    def sys_write(self, sc: Syscall, proc: Process) -> None:
        self._write(sc, proc, string_arg(sc.args[1]), None)

    def sys_pwrite64(self, sc: Syscall, proc: Process) -> None:
        self._write(sc, proc, string_arg(sc.args[1]), int(sc.args[3]))

    def _iov(self, arg: str) -> bytes:
        return b"".join(string_arg(m) for m in re.findall(r'iov_base=("(?:[^"\\]|\\.)*")',
                                                           arg))

    def sys_writev(self, sc: Syscall, proc: Process) -> None:
        self._write(sc, proc, self._iov(sc.args[1]), None)

    def sys_pwritev(self, sc: Syscall, proc: Process) -> None:
        self._write(sc, proc, self._iov(sc.args[1]), int(sc.args[3]))

    sys_pwritev2 = sys_pwritev

    def sys_ftruncate(self, sc: Syscall, proc: Process) -> None:
        of = self.fd(sc, proc, sc.args[0])
        if of is not None and of.ino is not None:
            self.emit(Truncate(self.rel(of.path) or "", sc.line, of.ino, int(sc.args[1])))

    def sys_truncate(self, sc: Syscall, proc: Process) -> None:
        rel = self.rel(self.resolve(sc, proc, None, sc.args[0]))
        if rel is not None:
            self.emit(Truncate(rel, sc.line, self.must(sc, rel), int(sc.args[1])))

    def sys_fallocate(self, sc: Syscall, proc: Process) -> None:
        if self.fd(sc, proc, sc.args[0]) is not None:
            raise TraceError(f"line {sc.line}: fallocate is not modelled")

    def _mkdir(self, sc: Syscall, proc: Process, dirfd: str | None, raw: str,
               mode: str) -> None:
        rel = self.rel(self.resolve(sc, proc, dirfd, raw))
        if rel is None:
            return
        parent, name = self.split(sc, rel)
        ino = self.new_inode("dir", int(mode, 8))
        self.emit(Create(rel, sc.line, parent, name, ino, "dir"))

    def sys_mkdir(self, sc: Syscall, proc: Process) -> None:
        self._mkdir(sc, proc, None, sc.args[0], sc.args[1])

    def sys_mkdirat(self, sc: Syscall, proc: Process) -> None:
        self._mkdir(sc, proc, sc.args[0], sc.args[1], sc.args[2])

    def _unlink(self, sc: Syscall, proc: Process, dirfd: str | None, raw: str) -> None:
        rel = self.rel(self.resolve(sc, proc, dirfd, raw))
        if rel is None:
            return
        parent, name = self.split(sc, rel)
        self.emit(Unlink(rel, sc.line, parent, name, self.must(sc, rel)))

    def sys_unlink(self, sc: Syscall, proc: Process) -> None:
        self._unlink(sc, proc, None, sc.args[0])

    sys_rmdir = sys_unlink

    def sys_unlinkat(self, sc: Syscall, proc: Process) -> None:
        self._unlink(sc, proc, sc.args[0], sc.args[1])

    def _rename(self, sc: Syscall, proc: Process, sdir: str | None, src: str,
                ddir: str | None, dst: str, flags: str = "") -> None:
        if "RENAME_EXCHANGE" in flags:
            raise TraceError(f"line {sc.line}: RENAME_EXCHANGE is not modelled")
        srel = self.rel(self.resolve(sc, proc, sdir, src))
        drel = self.rel(self.resolve(sc, proc, ddir, dst))
        if srel is None and drel is None:
            return
        if srel is None or drel is None:
            raise TraceError(f"line {sc.line}: rename across the repository boundary")
        sparent, sname = self.split(sc, srel)
        dparent, dname = self.split(sc, drel)
        ino = self.must(sc, srel)
        self.emit(Rename(srel, sc.line, sparent, sname, dparent, dname, ino,
                         self.image.lookup(drel), drel))

    def sys_rename(self, sc: Syscall, proc: Process) -> None:
        self._rename(sc, proc, None, sc.args[0], None, sc.args[1])

    def sys_renameat(self, sc: Syscall, proc: Process) -> None:
        self._rename(sc, proc, sc.args[0], sc.args[1], sc.args[2], sc.args[3])

    def sys_renameat2(self, sc: Syscall, proc: Process) -> None:
        self._rename(sc, proc, sc.args[0], sc.args[1], sc.args[2], sc.args[3], sc.args[4])

    def _link(self, sc: Syscall, proc: Process, sdir: str | None, src: str,
              ddir: str | None, dst: str) -> None:
        srel = self.rel(self.resolve(sc, proc, sdir, src))
        drel = self.rel(self.resolve(sc, proc, ddir, dst))
        if srel is None and drel is None:
            return
        if srel is None or drel is None:
            raise TraceError(f"line {sc.line}: link across the repository boundary")
        parent, name = self.split(sc, drel)
        self.emit(Link(srel, sc.line, parent, name, self.must(sc, srel), drel))

    def sys_link(self, sc: Syscall, proc: Process) -> None:
        self._link(sc, proc, None, sc.args[0], None, sc.args[1])

    def sys_linkat(self, sc: Syscall, proc: Process) -> None:
        self._link(sc, proc, sc.args[0], sc.args[1], sc.args[2], sc.args[3])

    def _symlink(self, sc: Syscall, proc: Process, target: str, dirfd: str | None,
                 raw: str) -> None:
        rel = self.rel(self.resolve(sc, proc, dirfd, raw))
        if rel is None:
            return
        parent, name = self.split(sc, rel)
        ino = self.new_inode("symlink", 0o777, string_arg(target))
        self.emit(Create(rel, sc.line, parent, name, ino, "symlink"))

    def sys_symlink(self, sc: Syscall, proc: Process) -> None:
        self._symlink(sc, proc, sc.args[0], None, sc.args[1])

    def sys_symlinkat(self, sc: Syscall, proc: Process) -> None:
        self._symlink(sc, proc, sc.args[0], sc.args[1], sc.args[2])

    def sys_fchmod(self, sc: Syscall, proc: Process) -> None:
        of = self.fd(sc, proc, sc.args[0])
        if of is not None and of.ino is not None:
            self.emit(Chmod(self.rel(of.path) or "", sc.line, of.ino, int(sc.args[1], 8)))

    def _chmod(self, sc: Syscall, proc: Process, dirfd: str | None, raw: str,
               mode: str) -> None:
        rel = self.rel(self.resolve(sc, proc, dirfd, raw))
        if rel is not None:
            self.emit(Chmod(rel, sc.line, self.must(sc, rel), int(mode, 8)))

    def sys_chmod(self, sc: Syscall, proc: Process) -> None:
        self._chmod(sc, proc, None, sc.args[0], sc.args[1])

    def sys_fchmodat(self, sc: Syscall, proc: Process) -> None:
        self._chmod(sc, proc, sc.args[0], sc.args[1], sc.args[2])

    def _fsync(self, sc: Syscall, proc: Process, data_only: bool) -> None:
        of = self.fd(sc, proc, sc.args[0])
        if of is not None and of.ino is not None:
            self.emit(Fsync(self.rel(of.path) or "", sc.line, of.ino, data_only))

    def sys_fsync(self, sc: Syscall, proc: Process) -> None:
        self._fsync(sc, proc, False)

    def sys_fdatasync(self, sc: Syscall, proc: Process) -> None:
        self._fsync(sc, proc, True)

    def sys_sync_file_range(self, sc: Syscall, proc: Process) -> None:
        of = self.fd(sc, proc, sc.args[0])
        flags = sc.args[3]
        if (of is not None and of.ino is not None and "SYNC_FILE_RANGE_WRITE" in flags
                and "SYNC_FILE_RANGE_WAIT_AFTER" in flags):
            self.emit(Writeback(self.rel(of.path) or "", sc.line, of.ino))

    def sys_syncfs(self, sc: Syscall, proc: Process) -> None:
        path = annotation(sc.args[0])
        if path is not None and self.rel(path) is not None:
            self.emit(SyncAll("", sc.line))

    def sys_sync(self, sc: Syscall, proc: Process) -> None:
        self.emit(SyncAll("", sc.line))

    def sys_chdir(self, sc: Syscall, proc: Process) -> None:
        proc.cwd = self.resolve(sc, proc, None, sc.args[0])

    def sys_fchdir(self, sc: Syscall, proc: Process) -> None:
        proc.cwd = annotation(sc.args[0]) or proc.cwd

    def _noop(self, sc: Syscall, proc: Process) -> None:
        """Forks are read in a first pass (:func:`convert`)."""

    sys_clone = sys_clone3 = sys_fork = sys_vfork = _noop


def _children(calls: Sequence[Syscall]) -> dict[int, tuple[int, bool]]:
    """child pid -> (parent pid, shares the descriptor table). A child inherits
    its parent's descriptors and directory as they are when it first appears
    (the parent is still inside fork then); each then changes on its own."""
    out: dict[int, tuple[int, bool]] = {}
    for sc in calls:
        if sc.name in ("clone", "clone3", "fork", "vfork") and not sc.failed:
            out[sc.value] = (sc.pid, "CLONE_FILES" in " ".join(sc.args))
    return out


def convert(lines: Iterable[str], root: Path, snapshot: Path, umask: int = 0o022) -> Trace:
    """The logical operations of a trace, for paths under ``root``; ``snapshot``
    is a copy of ``root`` taken just before the traced run."""
    calls = list(parse(lines))
    conv = _Converter(os.path.realpath(root), snapshot, umask)
    conv.parents = _children(calls)
    for sc in calls:
        conv.handle(sc)
    return Trace(conv.ops, conv.new_inodes, conv.root)


def run_traced(argv: Sequence[str], cwd: Path, out: Path,
               env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*strace_command(out), *argv], cwd=cwd, env=env,
                          capture_output=True)


def fidelity_errors(trace: Trace, snapshot: Path, final: Path) -> list[str]:
    """Differences between replaying every operation and the real final directory."""
    image = trace.image(snapshot)
    for op in trace.ops:
        image.apply(op)
    errors: list[str] = []
    seen: set[str] = set()
    for rel, ino, node in image.walk():
        seen.add(rel)
        path = final / rel
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            errors.append(f"{rel}: in the model, not on disk")
            continue
        if node.kind == "file":
            if not stat.S_ISREG(st.st_mode):
                errors.append(f"{rel}: a file in the model, not on disk")
            elif image.data(ino) != path.read_bytes():
                errors.append(f"{rel}: contents differ")
            elif stat.S_IMODE(st.st_mode) != node.mode:
                errors.append(f"{rel}: mode {node.mode:o} in the model, "
                              f"{stat.S_IMODE(st.st_mode):o} on disk")
        elif node.kind == "dir" and not stat.S_ISDIR(st.st_mode):
            errors.append(f"{rel}: a directory in the model, not on disk")
    for dirpath, dirnames, filenames in os.walk(final):
        for name in dirnames + filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), final)
            if rel not in seen:
                errors.append(f"{rel}: on disk, not in the model")
    return errors
