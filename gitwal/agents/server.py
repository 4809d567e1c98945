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
it is handling are answered (server_stop.py: ``git wal agent-server --stop``).
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

from . import client, framing
from .hook import can_refuse, check_after, run_hook
from .server_stop import STOP_WAIT, lock_path

IDLE = 900.0  # seconds without a request before the server exits
IDLE_KEY = "wal.agent.serverIdle"
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
