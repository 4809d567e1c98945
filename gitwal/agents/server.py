"""The long-lived hook server of one repository (`git wal agent-server`).

Started on demand by the hook client (client.py), it answers hook calls over
a Unix socket with exactly what ``git wal hook AGENT`` would print: the same
function (:func:`gitwal.agents.hook.run_hook`) runs, with its imports and
the repository already loaded. Appends still take the run's lock, so the
server, in-process hooks and `git wal` commands can run side by side.

It serves only its own user: the socket is mode 0600 in a 0700 directory of
the user's (client.check_private_dir), and each peer's uid is checked with
SO_PEERCRED. It exits after ``idle`` seconds without a request (``git config
wal.agent.serverIdle SECONDS``, default 900), and at SIGTERM once the calls
it is handling are answered (:func:`stop`: ``git wal agent-server --stop``).
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from ..base.errors import WalError
from . import client, framing
from .hook import can_refuse, check_after, run_hook

IDLE = 900.0  # seconds without a request before the server exits
IDLE_KEY = "wal.agent.serverIdle"
STOP_WAIT = 10.0  # seconds a stopped server may take to finish its calls
QUIET = 0.25  # seconds without a request before a background tree check runs
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def code_fingerprint() -> tuple[tuple[str, int], ...]:
    """(file, mtime) of every module of the installed gitwal package."""
    out = []
    root = Path(__file__).resolve().parent.parent
    for d in (root, *(p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__")):
        for entry in os.scandir(d):
            if entry.name.endswith(".py"):
                out.append((entry.path, entry.stat().st_mtime_ns))
    return tuple(sorted(out))


def peer_uid(conn: socket.socket) -> int:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return int(_UCRED.unpack(raw)[1])


def idle_of(gitdir: str) -> float:
    """``wal.agent.serverIdle`` of the repository (seconds), else :data:`IDLE`."""
    import pygit2

    try:
        value = float(str(pygit2.Repository(os.path.dirname(gitdir)).config[IDLE_KEY]))
    except (KeyError, ValueError, pygit2.GitError):
        return IDLE
    return value if value > 0 else IDLE


def lock_path(gitdir: str) -> str:
    """The server's lock: held for its whole life, its pid inside."""
    return client.socket_path(gitdir)[:-5] + ".lock"


class ServerDirRefused(WalError):
    """The runtime directory is not safely this user's: its lock files are not trusted."""


class ServerNotStopped(WalError):
    """A hook server outlived SIGKILL (an uninterruptible process)."""


class Server:
    def __init__(self, gitdir: str, idle: float = IDLE) -> None:
        self.gitdir = gitdir
        self.path = client.socket_path(gitdir)
        self.idle = idle
        self.last = time.monotonic()
        self.busy = 0
        self.seq = 0  # requests received so far
        self.code = code_fingerprint()  # a server never answers with code that changed
        self.guard = threading.Lock()
        self.stale = False
        self.stopping = False  # SIGTERM: answer the calls in hand, then exit

    def handle(self, conn: socket.socket) -> None:
        with conn:
            with self.guard:
                self.busy += 1
                self.seq += 1
                seq = self.seq
            try:
                if peer_uid(conn) != os.getuid():
                    return  # another user's process: not served
                if code_fingerprint() != self.code:
                    self.stale = True
                    return  # the client runs the hook itself and starts a new server
                agent, cwd, payload = framing.read_request(conn)
                try:
                    code, out, err = run_hook(agent, payload, None, cwd, served=True)
                except Exception as e:  # the in-process hook would refuse too
                    code, out = (2 if can_refuse(agent, payload) else 1), ""
                    err = (f"gitwal: internal error in the {agent} hook server: "
                           f"{type(e).__name__}: {e}\n")
                conn.sendall(framing.reply(code, out.encode(), err.encode()))
                conn.close()  # the agent goes on; the tree check below is ours
                self.check(agent, payload, cwd, seq)
            except (OSError, ValueError):
                pass  # the client saw the connection fail and runs the hook itself
            finally:
                with self.guard:
                    self.busy -= 1
                    self.last = time.monotonic()

    def check(self, agent: str, payload: bytes, cwd: str, seq: int) -> None:
        """The whole-tree check after a call, once the agent is quiet: while calls
        follow each other it would only hold the run lock they need (a `Stop`
        hook compares the whole tree at the end of the turn in any case)."""
        time.sleep(QUIET)
        with self.guard:
            if self.seq != seq:
                return
        try:
            check_after(agent, payload, cwd)
        except Exception as e:  # a failed check is retried after the next call
            sys.stderr.write(f"gitwal agent-server: tree check failed: {e}\n")

    def serve(self) -> int:
        rdir = client.runtime_dir()
        problem = client.check_private_dir(rdir)
        if problem is not None:
            sys.stderr.write(f"gitwal agent-server: refusing to serve: {problem}\n")
            return 1
        lock = os.open(lock_path(self.gitdir), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another server for this repository is running or starting
        os.ftruncate(lock, 0)
        os.write(lock, b"%d\n" % os.getpid())  # who serves (to stop it: kill that pid)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # We hold the lock: a socket file left here belongs to a dead server.
            Path(self.path).unlink(missing_ok=True)
            old = os.umask(0o177)
            try:
                sock.bind(self.path)
            finally:
                os.umask(old)
            os.chmod(self.path, 0o600)
            sock.listen(64)
            sock.settimeout(1.0)
            if threading.current_thread() is threading.main_thread():
                def on_term(signum: int, frame: object) -> None:
                    self.stopping = True
                    sock.shutdown(socket.SHUT_RDWR)  # wakes accept() at once
                signal.signal(signal.SIGTERM, on_term)
            self._accept(sock)
            if self.stopping:
                self._drain()
            return 0
        finally:
            try:
                if os.path.exists(self.path):
                    os.unlink(self.path)
            finally:
                sock.close()
                os.close(lock)


    def _accept(self, sock: socket.socket) -> None:
        while not self.stale and not self.stopping:
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                with self.guard:
                    quiet = self.busy == 0 and time.monotonic() - self.last > self.idle
                if quiet:
                    return
                continue
            except OSError:
                if self.stopping:
                    return
                raise
            conn.settimeout(None)
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def _drain(self) -> None:
        """Let the calls in hand finish (their appends are atomic in any case)."""
        deadline = time.monotonic() + STOP_WAIT
        while time.monotonic() < deadline:
            with self.guard:
                if self.busy == 0:
                    return
            time.sleep(0.02)


def serve(gitdir: str, idle: float | None = None) -> int:
    return Server(gitdir, idle_of(gitdir) if idle is None else idle).serve()


# -- stopping a server -----------------------------------------------------------------


def _pid_in(fd: int) -> int:
    """The pid a running server wrote in its lock (it writes it just after locking)."""
    for _ in range(50):
        text = os.pread(fd, 32, 0).strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
        time.sleep(0.01)
    return 0


def _is_server(pid: int, without_proc: bool) -> bool:
    """Whether ``pid`` runs `git wal agent-server`. An exited, unreaped process
    has an empty command line, a reused pid another one; where there is no
    /proc, ``without_proc`` is the answer."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"agent-server" in f.read()
    except FileNotFoundError:
        return without_proc and not os.path.isdir("/proc/self")
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # already gone: its lock is about to be free


def stop_lock(path: str, timeout: float = STOP_WAIT) -> int | None:
    """Stop the server holding the lock at ``path``: its pid, or None if none ran.

    SIGTERM first (it answers the calls in hand, removes its socket, exits),
    SIGKILL after ``timeout`` seconds. Stopped = the lock is free again.
    """
    problem = client.check_private_dir(os.path.dirname(path), create=False)
    if problem is not None:
        if not os.path.exists(os.path.dirname(path)):
            return None  # no runtime dir: no server ever ran here
        raise ServerDirRefused(f"not stopping a hook server: {problem}",
                               "only a directory of mode 0700 owned by you is trusted")
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None  # nobody holds it: no server
        except BlockingIOError:
            pass
        pid = _pid_in(fd)
        if pid <= 0 or not _is_server(pid, without_proc=True):
            return None
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        killed = False
        while True:
            # The server frees its lock in its last `finally`, a moment before
            # the interpreter exits: stopped = the lock is free and the pid gone.
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not _is_server(pid, without_proc=False):
                    return pid
            except BlockingIOError:
                pass
            now = time.monotonic()
            if now > deadline and not killed:
                _signal(pid, signal.SIGKILL)  # a server that does not stop in time
                killed, deadline = True, now + 5.0
            elif now > deadline:
                raise ServerNotStopped(f"hook server {pid} did not exit after SIGKILL",
                                       f"see `ps -p {pid}`")
            time.sleep(0.02)
    finally:
        os.close(fd)


def stop(gitdir: str, timeout: float = STOP_WAIT) -> int | None:
    """Stop the hook server of the repository at ``gitdir`` (its pid, or None)."""
    return stop_lock(lock_path(gitdir), timeout)


def stop_all(timeout: float = STOP_WAIT) -> list[int]:
    """Stop every hook server of this user's runtime dir (their pids)."""
    rdir = client.runtime_dir()
    if not os.path.isdir(rdir):
        return []
    names = sorted(n for n in os.listdir(rdir) if n.endswith(".lock"))
    return [pid for n in names if (pid := stop_lock(os.path.join(rdir, n), timeout))]
