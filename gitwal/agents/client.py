"""The hook command agents run: a thin, stdlib-only client (no gitwal import).

Run as ``python -S -E .../gitwal/agents/hook_client.py AGENT`` (what the
command ``git wal install`` writes runs, from the launch cache: launch.py), or
by the ``git-wal-hook`` console script, it costs an interpreter start and a
socket round trip: the work happens in a long-lived server for the repository
(server.py), started on demand. The WAL rule holds on every path: if no server can be reached
(or its socket is not safely ours), the client runs the hook in a process of
its own (``python -m gitwal hook AGENT``), which logs before it answers.

Trust: the socket lives in a directory only this user can enter
(``$XDG_RUNTIME_DIR/gitwal`` or ``/tmp/gitwal-<uid>``, mode 0700, owned by
the user, not a symlink); the client refuses a directory or socket that is
not so, and the server serves only peers of its own uid (SO_PEERCRED).

The messages on the socket are framing.py's (the server uses it too): a file
next to this one, imported as such when this file runs as a script; the Claude
Code plugin's copy of the client has it inlined (plugin_client.py).
"""

from __future__ import annotations

import _socket  # the C module: `socket` would import enum, selectors (~10 ms)
import os
import stat
import sys
import time

# -- framing: the plugin's copy has framing.py inlined here (plugin_client.py) --
if __package__:
    from .framing import read_reply, request
else:  # a script (hook_client.py, or this file): framing.py is in sys.path[0]
    from framing import read_reply, request  # type: ignore[import-not-found,no-redef]
# -- end of framing --

START_WAIT = 5.0  # seconds to wait for a server this client started
BLOCKING_EVENTS = ("PreToolUse", "PreCompact", "BeforeTool", "PreCompress")


def git_dir(start: str) -> str | None:
    """The .git entry (directory, or a worktree's gitdir file) above ``start``."""
    d = os.path.realpath(start)
    while True:
        cand = os.path.join(d, ".git")
        if os.path.exists(cand):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def runtime_dir() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return os.path.join(base, "gitwal")
    return os.path.join("/tmp", f"gitwal-{os.getuid()}")


def check_private_dir(path: str, create: bool = True) -> str | None:
    """None when ``path`` is a directory only this user can use; else why not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return f"{path} does not exist"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user"
    if st.st_mode & 0o077:
        return f"{path} is accessible to others (mode {st.st_mode & 0o777:o})"
    return None


def socket_path(gitdir: str) -> str:
    """One server per git dir: its socket's name is a digest of the real path."""
    data = os.path.realpath(gitdir).encode()
    try:
        import _sha1  # type: ignore[import-not-found]  # hashlib loads OpenSSL (~8 ms)

        key = str(_sha1.sha1(data).hexdigest())[:20]
    except ImportError:  # pragma: no cover (a Python built without it)
        import hashlib

        key = hashlib.sha1(data).hexdigest()[:20]
    return os.path.join(runtime_dir(), key + ".sock")


def check_socket(path: str) -> str | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user"
    return None


def ask(path: str, agent: str, cwd: str, payload: bytes) -> tuple[int, bytes, bytes]:
    """One request to the server at ``path`` (raises OSError when unreachable)."""
    frame = request(agent, cwd, payload)  # a FrameError (ValueError) before connecting
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.connect(path)
        s.sendall(frame)
        return read_reply(s)
    finally:
        s.close()


def launcher(args: list[str]) -> list[str]:
    """How to run gitwal: ``--git-wal CMD`` (a plugin: gitwal on PATH) or this python."""
    if "--git-wal" in args:
        return [args[args.index("--git-wal") + 1]]
    return [sys.executable, "-m", "gitwal"]


def start_server(run: list[str], gitdir: str) -> None:
    import subprocess  # only when no server runs (~12 ms to import)

    env = dict(os.environ)
    env.pop("GITWAL_CRASH_AT", None)  # a crash test targets the hook, not the server
    env.pop("GITWAL_PAUSE_AT", None)
    subprocess.Popen([*run, "agent-server", "--git-dir", gitdir], env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def blocking(payload: bytes) -> bool:
    """Whether the call can be refused (its event is one that blocks)."""
    return any(b'"%s"' % ev.encode() in payload for ev in BLOCKING_EVENTS)


def in_process(run: list[str], agent: str, payload: bytes, why: str) -> int:
    import subprocess

    try:
        proc = subprocess.run([*run, "hook", agent], input=payload, capture_output=True)
    except OSError as e:
        # No gitwal to run: a call about to change files is refused (the WAL
        # rule), anything else goes on with a non-blocking error.
        sys.stderr.write(f"gitwal: cannot run {run[0]} ({e}); is gitwal installed? The "
                         "hook could not log this call.\n")
        return 2 if blocking(payload) else 1
    sys.stdout.buffer.write(proc.stdout)
    sys.stderr.buffer.write(proc.stderr)
    if proc.returncode not in (0, 2) and blocking(payload) and (
            b"No module named" in proc.stderr or b"Traceback (most recent call" in proc.stderr):
        # gitwal itself could not run (a python without it, a broken install):
        # the hook never decided, so a call about to change files is refused.
        sys.stderr.write(f"gitwal: {run[0]} could not run gitwal's hook; the call was refused "
                         "because it could not be logged. Reinstall gitwal (pipx reinstall "
                         f"gitwal), or remove the hooks (git wal uninstall {agent}).\n")
        return 2
    if why and proc.returncode == 0:
        sys.stderr.write(f"gitwal: ran the hook without its server: {why}\n")
    return proc.returncode


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: client.py AGENT [--git-wal CMD]\n")
        return 2
    agent = argv[0]
    payload = sys.stdin.buffer.read()
    cwd = os.getcwd()
    gitdir = git_dir(cwd)
    if gitdir is None:
        return 0  # not in a git working tree: nothing to log
    run = launcher(argv[1:])
    if os.environ.get("GITWAL_NO_SERVER"):
        return in_process(run, agent, payload, "")
    problem = check_private_dir(runtime_dir())
    path = socket_path(gitdir)
    if problem is None:
        problem = check_socket(path)
        if problem == "absent":
            start_server(run, gitdir)
            deadline = time.monotonic() + START_WAIT
            while problem is not None and time.monotonic() < deadline:
                time.sleep(0.02)
                problem = check_socket(path)
                if problem not in (None, "absent"):
                    break
    if problem is None:
        for attempt in range(50):
            try:
                code, out, err = ask(path, agent, cwd, payload)
            except (ConnectionRefusedError, FileNotFoundError):
                if attempt == 0:  # a stale socket: its server is gone
                    start_server(run, gitdir)
                time.sleep(0.05)
                continue
            except (OSError, ValueError) as e:
                # The request may or may not have been handled: the hook is
                # idempotent per call id, so running it again is safe.
                return in_process(run, agent, payload, f"the server failed ({e})")
            sys.stdout.buffer.write(out)
            sys.stderr.buffer.write(err)
            return code
        problem = "the server did not answer"
    return in_process(run, agent, payload, problem)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
