"""Real git servers on 127.0.0.1 for the remote tests: smart HTTP and git://.

``HttpGitServer`` is git's smart HTTP, ``git http-backend``, behind lighttpd
through its mod_cgi; ``GitDaemon`` is ``git daemon``. Both serve the bare
repositories under ``<base>/repos`` (``add_bare``), accept pushes without
authentication, listen on the loopback only, keep their configuration and logs
under ``<base>``, and can be stopped and started again on the same port, so
``url()`` stays valid: a test stops a server to cut the network between a
clone and its remote.

Why mod_cgi and not fcgiwrap: git-http-backend is a CGI program, and
git-http-backend(1) documents lighttpd with mod_cgi. fcgiwrap would fork the
same CGI program for every request, behind a second long-lived process and a
socket of its own; mod_cgi keeps a server to one process (and its requests'
children) in one process group, which ``stop()`` ends at once.

A free port: a random one below the kernel's ephemeral range (so no client's
outgoing connection holds it while the server is stopped), tried with a bind
first; if the server then loses the race for it (its log says "Address already
in use"), the next candidate is tried. A restart reuses the port.

Readiness, without a fixed sleep: a bounded poll (a deadline, a few ms between
tries) until this start's log says the port is bound (lighttpd's "server
started", git daemon's "[<pid>] Ready to rumble": no other process can be
listening there then) and a real request is answered: lighttpd serves
``GET /ready``, a nonce written for this start; git daemon answers a git
protocol request with a pkt-line. A server that exits first fails the start
with its log (or, its port taken, moves to the next port).

Cleanup: every server runs in a process group of its own (``setsid``);
``stop()`` sends SIGTERM to the group, waits for the server, then SIGKILLs
what is left of the group (a CGI or a ``git daemon`` child mid-request), and
returns once the port refuses connections. Servers still running at
interpreter exit are stopped there, and with ``setpriv --pdeathsig`` a server
gets SIGTERM if the process that started it dies without cleaning up.
"""

from __future__ import annotations

import atexit
import http.client
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
READY_WITHIN = 30.0  # seconds: a loaded two-core machine, many test processes
POLL = 0.005  # seconds between two readiness tries
TRY_WITHIN = 1.0  # seconds for one try: a listener that never answers is not the server
PORT_TRIES = 8
IN_USE = "Address already in use"
HINT = "run `make tools` (it installs the suite's Debian packages)"

_running: set[GitServer] = set()  # stopped at exit, if still running then
_random = random.SystemRandom()  # not the `random` a test may have seeded


class ServerError(RuntimeError):
    """A git server is missing, did not start or did not stop."""


def _quote(value: str) -> str:
    """A lighttpd configuration string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _candidate_port() -> int:
    """A port free at this moment, below the ephemeral range."""
    low = _ephemeral_low()
    for _ in range(200):
        port = _random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise ServerError(f"no free port on {HOST} below {low}")


def _refuses(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((HOST, port)) != 0


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} is missing)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


def _exec_path() -> Path:
    out = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _find_lighttpd() -> str | None:
    """On PATH, or in /usr/sbin (not on a user's PATH on Debian)."""
    return shutil.which("lighttpd") or shutil.which("lighttpd", path="/usr/sbin:/sbin")


def _installed(program: Path | str | None, what: str) -> str:
    if program is None or not os.access(program, os.X_OK):
        raise ServerError(f"{what} is not installed (the {what} git server tests need it); "
                          f"{HINT}")
    return str(program)


class GitServer:
    """What both servers share: the repositories, the process, the port."""

    kind = "git server"
    slug = "server"  # names its files under logs/

    def __init__(self, base: Path) -> None:
        self.base = base
        self.repos = base / "repos"
        self.logs = base / "logs"
        self.home = base / "home"  # the server's own HOME and git config
        for d in (self.repos, self.logs, self.home):
            d.mkdir(parents=True, exist_ok=True)
        (self.home / ".gitconfig").write_text(self._git_config())
        self.out = self.logs / f"{self.slug}.out"  # the server's stdout and stderr
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0  # the size of ``_bound_log()`` when the current start began

    # -- what a test uses ----------------------------------------------------------

    def url(self, repo_name: str) -> str:
        raise NotImplementedError

    def add_bare(self, name: str, *, wal_hooks: bool = False) -> Path:
        """A new empty bare repository ``name`` (branch main) served here; with
        ``wal_hooks``, gitwal's server hook (pre-receive) installed in it."""
        path = self.repos / name
        self._run(["git", "init", "-q", "--bare", "-b", "main", str(path)], self.repos)
        if wal_hooks:
            self._run([str(Path(sys.executable).parent / "git-wal"), "hooks", "install"], path)
        return path

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process, leader of its process group, while it runs."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the server (on its port, once it has one); return once it answers."""
        if self.running:
            return
        command = self._command()  # raises first if a program is missing
        if self.port is not None:
            self._spawn_ready(command, self.port)
            return
        for _ in range(PORT_TRIES):
            port = _candidate_port()
            if self._spawn_ready(command, port, retry_if_taken=True):
                self.port = port
                return
        raise ServerError(f"{self.kind}: every port tried was taken before it could bind")

    def stop(self) -> None:
        """Stop the server and every process it started; return once its port
        refuses connections."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _running.discard(self)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        try:  # a request still being served: its CGI or git daemon child
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + READY_WITHIN
        while self.port is not None and not _refuses(self.port):
            if time.monotonic() > deadline:
                raise ServerError(f"{self.kind} stopped but {HOST}:{self.port} still answers")
            time.sleep(POLL)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The environment of the server and of every git (and hook) it runs: its
        own home and git config, none of the caller's; git-wal on PATH."""
        return {
            "PATH": str(Path(sys.executable).parent) + os.pathsep
            + os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
            "LANG": "C.UTF-8",
        }

    # -- what each server defines ----------------------------------------------------

    def _git_config(self) -> str:
        return ""

    def _command(self) -> list[str]:
        """The server's command line, ``{port}`` standing for its port."""
        raise NotImplementedError

    def _prepare(self, port: int) -> None:
        """Write what this start needs before the command runs."""

    def _logs(self) -> list[Path]:
        return [self.out]

    def _bound_log(self) -> Path:
        """The log where the server says it has bound its port."""
        return self.out

    def _bound_line(self, proc: subprocess.Popen[bytes]) -> bytes:
        """What it says there."""
        raise NotImplementedError

    def _answers(self, port: int) -> bool:
        """A real request to the server on ``port`` is answered, by this start."""
        raise NotImplementedError

    def _ready(self, port: int, proc: subprocess.Popen[bytes]) -> bool:
        # Bound by this start (so no other process can be listening there: its
        # answer is this server's) ...
        try:
            with self._bound_log().open("rb") as f:
                f.seek(self._log_start)
                if self._bound_line(proc) not in f.read():
                    return False
        except FileNotFoundError:
            return False
        # ... and serving.
        return self._answers(port)

    # -- the process -----------------------------------------------------------------

    def _run(self, args: list[str], cwd: Path) -> None:
        proc = subprocess.run(args, cwd=cwd, env=self.env(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise ServerError(f"{' '.join(args)} failed: {proc.stderr}")

    def _said(self) -> str:
        return "\n".join(f"{path.name}:\n{_tail(path)}" for path in self._logs())

    def _spawn_ready(self, command: list[str], port: int, retry_if_taken: bool = False) -> bool:
        """Start the server on ``port`` and wait until it answers. False when
        ``retry_if_taken`` and another process holds the port."""
        self._prepare(port)
        setpriv = shutil.which("setpriv")
        prefix = [setpriv, "--pdeathsig", "TERM", "--"] if setpriv is not None else []
        log = self._bound_log()
        self._log_start = log.stat().st_size if log.exists() else 0
        with self.out.open("ab") as out:
            proc = subprocess.Popen(
                [*prefix, *(arg.replace("{port}", str(port)) for arg in command)],
                cwd=self.base, env=self.env(), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        self._proc = proc
        _running.add(self)
        deadline = time.monotonic() + READY_WITHIN
        while True:
            if proc.poll() is not None:
                self._proc = None
                _running.discard(self)
                said = self._said()
                if retry_if_taken and IN_USE in said:
                    return False
                raise ServerError(f"{self.kind} on port {port} exited with "
                                  f"{proc.returncode}:\n{said}")
            if self._ready(port, proc):
                return True
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"{self.kind} on port {port} did not answer within "
                                  f"{READY_WITHIN:.0f} s:\n{self._said()}")
            time.sleep(POLL)


class HttpGitServer(GitServer):
    """``git http-backend`` behind lighttpd (mod_cgi): push and fetch over
    http://127.0.0.1:<port>/git/<repo>, no authentication."""

    kind = "lighttpd (git http-backend)"
    slug = "lighttpd"

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.docroot = base / "htdocs"
        self.uploads = base / "uploads"  # the request bodies lighttpd buffers
        self.docroot.mkdir(exist_ok=True)
        self.uploads.mkdir(exist_ok=True)
        self.error_log = self.logs / "lighttpd-error.log"
        self.access_log = self.logs / "lighttpd-access.log"
        self._nonce = ""

    def url(self, repo_name: str) -> str:
        assert self.port is not None, "start the server first"
        return f"http://{HOST}:{self.port}/git/{repo_name}"

    def _git_config(self) -> str:
        return "[http]\n\treceivepack = true\n"  # push with no authenticated user

    def _logs(self) -> list[Path]:
        return [self.error_log, self.out]

    def _command(self) -> list[str]:
        lighttpd = _find_lighttpd()
        _installed(_exec_path() / "git-http-backend", "git-http-backend")
        return [_installed(lighttpd, "lighttpd"), "-D", "-f", str(self.base / "lighttpd.conf")]

    def _prepare(self, port: int) -> None:
        self._nonce = secrets.token_hex(16)
        (self.docroot / "ready").write_text(self._nonce)
        # mod_cgi gives a CGI the request's variables only, never the server's
        # environment: git's must be set here.
        cgi_env = {**self.env(), "GIT_PROJECT_ROOT": str(self.repos),
                   "GIT_HTTP_EXPORT_ALL": "1"}
        env_list = ",\n    ".join(f"{_quote(k)} => {_quote(v)}" for k, v in cgi_env.items())
        backend = str(_exec_path() / "git-http-backend")
        (self.base / "lighttpd.conf").write_text(f"""\
server.modules = ("mod_alias", "mod_cgi", "mod_setenv", "mod_accesslog")
server.bind = {_quote(HOST)}
server.port = {port}
server.document-root = {_quote(str(self.docroot))}
server.upload-dirs = ({_quote(str(self.uploads))})
server.errorlog = {_quote(str(self.error_log))}
accesslog.filename = {_quote(str(self.access_log))}
alias.url = ("/git" => {_quote(backend)})
$HTTP["url"] =~ "^/git/" {{
  cgi.assign = ("" => "")
  setenv.set-environment = (
    {env_list}
  )
}}
""")

    def _bound_log(self) -> Path:
        return self.error_log

    def _bound_line(self, proc: subprocess.Popen[bytes]) -> bytes:
        return b") server started (lighttpd/"

    def _answers(self, port: int) -> bool:
        conn = http.client.HTTPConnection(HOST, port, timeout=TRY_WITHIN)
        try:
            conn.request("GET", "/ready")
            response = conn.getresponse()
            return response.status == 200 and response.read().decode() == self._nonce
        except OSError:
            return False
        finally:
            conn.close()


class GitDaemon(GitServer):
    """``git daemon`` serving every repository under ``repos`` over
    git://127.0.0.1:<port>/<repo>, receive-pack enabled."""

    kind = "git daemon"
    slug = "git-daemon"

    def url(self, repo_name: str) -> str:
        assert self.port is not None, "start the server first"
        return f"git://{HOST}:{self.port}/{repo_name}"

    def _command(self) -> list[str]:
        # git-daemon itself, not `git daemon` (which would run it as a child):
        # the process started is the one that logs "[<pid>] Ready to rumble".
        daemon = _installed(_exec_path() / "git-daemon", "git-daemon")
        return [daemon, "--reuseaddr", f"--listen={HOST}", "--port={port}",
                f"--base-path={self.repos}", "--export-all", "--enable=receive-pack",
                "--informative-errors", "--verbose", "--log-destination=stderr",
                str(self.repos)]

    def _bound_line(self, proc: subprocess.Popen[bytes]) -> bytes:
        return f"[{proc.pid}] Ready to rumble".encode()

    def _answers(self, port: int) -> bool:
        # A git protocol request: any pkt-line in reply will do.
        request = f"git-upload-pack /.ready\0host={HOST}\0".encode()
        try:
            with socket.create_connection((HOST, port), timeout=TRY_WITHIN) as s:
                s.sendall(b"%04x" % (len(request) + 4) + request)
                head = s.recv(4)
        except OSError:
            return False
        return len(head) == 4 and all(c in b"0123456789abcdef" for c in head)


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()
