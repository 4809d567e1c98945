"""Run the real Claude Code CLI against the scripted API, sealed from the host.

Each :class:`ClaudeCode` has its own ``HOME`` (Claude Code keeps its config and
session transcripts there), a dummy API key, no telemetry or update checks,
and a ``PATH`` on which ``git wal`` is this checkout's. Every inherited
``ANTHROPIC_*``/``CLAUDE*`` variable is dropped, so the host's own Claude Code
setup never leaks into a test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent
# The tools the scripted sessions use; fewer tools keep every request small.
TOOLS = "Edit,Write,Bash,Read"
EVENTS_WITH_MATCHER = ("PreToolUse", "PostToolUse", "PostToolUseFailure")


@dataclass(frozen=True)
class Finished:
    """One finished agent process (every driver's outcome has these)."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class Outcome(Finished):
    """One finished ``claude -p`` process."""

    @property
    def result(self) -> dict[str, Any]:
        """The ``--output-format json`` result object."""
        try:
            data = json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"claude printed no JSON result (exit {self.returncode}): "
                                 f"{self.stdout[-500:]!r} {self.stderr[-1500:]!r}") from None
        if not isinstance(data, dict):
            raise AssertionError(f"unexpected claude output: {self.stdout[-500:]!r}")
        return data


def sealed_env(home: Path, agent: tuple[str, ...] = ("ANTHROPIC_", "CLAUDE")
               ) -> dict[str, str]:
    """The environment without the host's git, gitwal or agent settings (the
    variables starting with one of ``agent``), git's identity fixed."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith((*agent, "GIT_", "GITWAL_"))}
    return {
        **keep,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
    }


class ClaudeCode:
    """The ``claude`` binary with a private home, pointed at ``api_url``."""

    def __init__(self, binary: Path, home: Path, api_url: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.binary = binary
        self.home = home
        self.api_url = api_url
        self.extra_env = dict(env or {})
        home.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        env = {
            **sealed_env(self.home),
            "ANTHROPIC_BASE_URL": self.api_url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            **self.extra_env,
        }
        if os.geteuid() == 0:
            # Claude Code refuses to run as root outside a declared sandbox.
            env["IS_SANDBOX"] = "1"
        return env

    def argv(self, prompt: str, *, session_id: str | None = None,
             resume: str | None = None) -> list[str]:
        argv = [str(self.binary), "-p", prompt, "--output-format", "json",
                "--permission-mode", "acceptEdits", "--allowedTools", "Edit,Write,Bash",
                "--tools", TOOLS]
        if session_id:
            argv += ["--session-id", session_id]
        if resume:
            argv += ["--resume", resume]
        return argv

    def run(self, repo: Path, prompt: str, *, session_id: str | None = None,
            resume: str | None = None, timeout: float = 300) -> Outcome:
        t0 = time.perf_counter()
        proc = subprocess.run(self.argv(prompt, session_id=session_id, resume=resume),
                              cwd=repo, env=self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)

    def start(self, repo: Path, prompt: str, *, session_id: str | None = None,
              resume: str | None = None, log: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``claude`` in a process group of its own, for :func:`sigkill`.

        Its hooks run in process groups of their own and outlive that kill,
        as they would a real crash.
        """
        out = log.open("wb") if log else subprocess.DEVNULL
        try:
            return subprocess.Popen(self.argv(prompt, session_id=session_id, resume=resume),
                                    cwd=repo, env=self.env(), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            if log and not isinstance(out, int):
                out.close()


def sigkill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads, and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def wait_until(cond: Callable[[], bool], timeout: float, what: str,
               proc: subprocess.Popen[bytes] | None = None, interval: float = 0.05) -> None:
    """Poll ``cond``; fail with ``what`` on time-out or if ``proc`` ended first."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"claude exited ({proc.returncode}) before: {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(interval)


# -- gitwal's hook servers ---------------------------------------------------------


@contextmanager
def private_runtime_dir() -> Iterator[Path]:
    """A fresh ``XDG_RUNTIME_DIR`` for gitwal's hook servers, stopped on exit.

    The hooks start one long-lived server per repository, with its socket
    and lock in ``$XDG_RUNTIME_DIR/gitwal``. A private directory keeps the
    tests' servers apart from the user's, and lets the tests stop exactly the
    servers they started. The path is short: a socket path must fit in 108
    bytes.
    """
    path = Path(tempfile.mkdtemp(prefix="gwrt-"))  # mode 0700, as the servers require
    old = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = old
        stop_servers(path)
        shutil.rmtree(path, ignore_errors=True)


def stop_servers(runtime: Path) -> None:
    """Stop every hook server of the runtime dir ``runtime`` the documented way:
    ``git wal agent-server --stop --all`` (SIGTERM, then SIGKILL, by the pid in
    each held lock; a lock nobody holds belongs to a server that is gone)."""
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    proc = subprocess.run([str(VENV_BIN / "git-wal"), "agent-server", "--stop", "--all"],
                          env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise AssertionError(f"stopping the hook servers failed: {proc.stderr}")


# -- hook configurations --------------------------------------------------------


def hooks_settings(commands: Mapping[str, str | Sequence[str]],
                   matcher: str = "*") -> dict[str, Any]:
    """A settings object running ``commands[event]`` on each named event."""
    hooks: dict[str, Any] = {}
    for event, cmds in commands.items():
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": c}
                                           for c in ([cmds] if isinstance(cmds, str) else cmds)]}
        if event in EVENTS_WITH_MATCHER:
            group["matcher"] = matcher
        hooks[event] = [group]
    return {"hooks": hooks}


def noop_like(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The same hook entries (events, matchers, timeouts) with every command ``true``.

    The baseline of the timing benchmark: Claude Code starts the same number
    of hook processes on the same events, and each does nothing.
    """
    out = json.loads(json.dumps(settings))
    for groups in out.get("hooks", {}).values():
        for group in groups:
            for hook in group.get("hooks", []):
                if hook.get("type") == "command":
                    hook["command"] = "true"
    return {"hooks": out.get("hooks", {})}


def write_settings(repo: Path, settings: Mapping[str, Any], name: str = "settings.json") -> Path:
    path = repo / ".claude" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def cmd(repo: Path, *argv: str, env: Mapping[str, str],
        ok: Sequence[int] = (0,)) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ``repo``; fail with its stderr unless it exits with one of ``ok``."""
    proc = subprocess.run(list(argv), cwd=repo, env=dict(env), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if proc.returncode not in ok:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
    return proc


def git_wal(repo: Path, *args: str, env: Mapping[str, str],
            ok: Sequence[int] = (0,)) -> subprocess.CompletedProcess[str]:
    return cmd(repo, str(VENV_BIN / "git-wal"), *args, env=env, ok=ok)


def install_gitwal_hooks(repo: Path, env: Mapping[str, str],
                         scope: str = "project") -> dict[str, Any]:
    """``git wal install claude --scope SCOPE`` in ``repo``; the settings it wrote."""
    git_wal(repo, "install", "claude", "--scope", scope, env=env)
    name = {"project": "settings.json", "local": "settings.local.json"}[scope]
    data = json.loads((repo / ".claude" / name).read_text())
    assert isinstance(data, dict)
    return data


def make_project(path: Path, files: Mapping[str, str], env: Mapping[str, str],
                 hooks: str | Mapping[str, Any] | None = "gitwal") -> Path:
    """A repository holding ``files`` and its hooks, all in its first commit.

    ``hooks``: ``"gitwal"`` (installed with ``git wal install claude``), a
    settings object for .claude/settings.json, or None. The settings are
    committed, as a project's are; ``.claude/settings.local.json`` (where
    tests add hooks of their own) is ignored, as Claude Code's docs advise.
    """
    path.mkdir(parents=True)
    cmd(path, "git", "init", "-q", "-b", "main", env=env)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    if hooks == "gitwal":
        install_gitwal_hooks(path, env)
    elif hooks is not None and not isinstance(hooks, str):
        write_settings(path, hooks)
    with (path / ".git" / "info" / "exclude").open("a") as f:
        f.write(".claude/settings.local.json\n")
    cmd(path, "git", "add", "-A", env=env)
    cmd(path, "git", "commit", "-q", "-m", "init", env=env)
    return path
