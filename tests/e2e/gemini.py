"""Run the real Gemini CLI against the scripted Gemini API, sealed from the host.

Each :class:`GeminiCli` has its own ``HOME`` holding ``~/.gemini/settings.json``
(API-key auth, no telemetry, no update checks) and ``trustedFolders.json``
(the test's repositories are trusted there, so their project hooks run), a
dummy API key, and a ``PATH`` on which ``git wal`` is this checkout's. Every
inherited ``GEMINI_*``/``GOOGLE_*`` variable is dropped.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .claude import Finished, cmd, git_wal
from .claude import sealed_env as claude_env

MODEL = "gemini-2.5-flash"  # a model name, so no routing request is made


@dataclass(frozen=True)
class Outcome(Finished):
    """One finished ``gemini -p`` process."""

    @property
    def result(self) -> dict[str, Any]:
        """The ``-o json`` result object."""
        try:
            data = json.loads(self.stdout[self.stdout.index("{"):])
        except ValueError:
            raise AssertionError(f"gemini printed no JSON result (exit {self.returncode}): "
                                 f"{self.stdout[-800:]!r} {self.stderr[-2000:]!r}") from None
        if not isinstance(data, dict):
            raise AssertionError(f"unexpected gemini output: {self.stdout[-500:]!r}")
        return data


def sealed_env(home: Path) -> dict[str, str]:
    return claude_env(home, ("GEMINI_", "GOOGLE_"))


class GeminiCli:
    """The ``gemini`` binary with a private home, pointed at ``api_url``."""

    def __init__(self, binary: Path, home: Path, api_url: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.binary = binary
        self.home = home
        self.api_url = api_url
        self.extra_env = dict(env or {})
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        self.settings({})

    def settings(self, extra: Mapping[str, Any]) -> None:
        """Write the user settings: API-key auth, quiet, plus ``extra``."""
        data = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "model": {"name": MODEL}, **extra}
        (self.home / ".gemini" / "settings.json").write_text(json.dumps(data, indent=2))

    def trust(self, folder: Path) -> None:
        """Mark ``folder`` trusted in ``~/.gemini/trustedFolders.json``."""
        path = self.home / ".gemini" / "trustedFolders.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data[str(folder)] = "TRUST_FOLDER"
        path.write_text(json.dumps(data, indent=2))

    def env(self) -> dict[str, str]:
        return {**sealed_env(self.home), "GEMINI_API_KEY": "e2e-dummy-key",
                "GOOGLE_GEMINI_BASE_URL": self.api_url, "GEMINI_CLI_NO_RELAUNCH": "true",
                "NO_COLOR": "1", **self.extra_env}

    def argv(self, prompt: str, resume: str | None = None,
             extra: Sequence[str] = ()) -> list[str]:
        argv = [str(self.binary), "-p", prompt, "--yolo", "-o", "json", "-m", MODEL, *extra]
        if resume:
            argv += ["--resume", resume]
        return argv

    def run(self, repo: Path, prompt: str, *, resume: str | None = None,
            extra: Sequence[str] = (), timeout: float = 300) -> Outcome:
        t0 = time.perf_counter()
        proc = subprocess.run(self.argv(prompt, resume, extra), cwd=repo, env=self.env(),
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)

    def start(self, repo: Path, prompt: str, *, resume: str | None = None,
              log: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``gemini`` in a process group of its own, for ``claude.sigkill``."""
        out = log.open("wb") if log else subprocess.DEVNULL
        try:
            return subprocess.Popen(self.argv(prompt, resume), cwd=repo, env=self.env(),
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            if log and not isinstance(out, int):
                out.close()


def make_project(path: Path, files: Mapping[str, str], env: Mapping[str, str],
                 extra: Mapping[str, Sequence[str]] | None = None) -> Path:
    """A repository holding ``files`` and ``.gemini/settings.json`` as ``git wal install
    gemini`` wrote it, all in its first commit; ``extra``: event -> commands added
    next to gitwal's (to record payloads, or hold a call)."""
    path.mkdir(parents=True)
    cmd(path, "git", "init", "-q", "-b", "main", env=env)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git_wal(path, "install", "gemini", env=env)
    if extra:
        settings = path / ".gemini" / "settings.json"
        data = json.loads(settings.read_text())
        for event, commands in extra.items():
            data["hooks"][event][0]["hooks"] += [
                {"type": "command", "command": c, "name": f"e2e-{event}-{i}",
                 "timeout": 180000} for i, c in enumerate(commands)]
        settings.write_text(json.dumps(data, indent=2))
    cmd(path, "git", "add", "-A", env=env)
    cmd(path, "git", "commit", "-q", "-m", "init", env=env)
    return path
