"""Run the real Codex CLI against the scripted Responses API, sealed from the host.

Each :class:`Codex` has its own ``HOME`` (Codex keeps ``~/.codex/config.toml``,
its hook trust and its session rollouts there), a config.toml that names the
scripted server as the model provider (``wire_api = "responses"``), runs
without approvals or sandbox, and a ``PATH`` on which ``git wal`` is this
checkout's. Every inherited ``OPENAI_*``/``CODEX_*`` variable is dropped, so the
host's own Codex setup never leaks into a test.

The hooks run only because they are trusted the way a user trusts them: the
project in ``[projects."<repo>"]``, each gitwal hook by ``git wal install codex
--trust`` (never ``--dangerously-bypass-hook-trust``), so a wrong trust hash
shows up as a session that logged nothing.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitwal.agents import codex_trust

from .claude import Finished, cmd, git_wal, sealed_env

MODEL = "gpt-5.5"  # a slug Codex 0.169.0 knows: its tool set includes apply_patch
EVENTS = ("SessionStart", "PreToolUse", "PostToolUse", "PreCompact", "Stop")


@dataclass(frozen=True)
class Outcome(Finished):
    """One finished ``codex exec --json`` process."""

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSONL events ``--json`` printed."""
        out = []
        for line in self.stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                out.append(event)
        return out

    @property
    def thread_id(self) -> str:
        for e in self.events:
            if e.get("type") == "thread.started":
                return str(e["thread_id"])
        raise AssertionError(f"codex started no thread (exit {self.returncode}): "
                             f"{self.stdout[-800:]!r} {self.stderr[-1500:]!r}")


def codex_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in sealed_env(home).items()
           if not k.startswith(("OPENAI_", "CODEX_"))}
    return {**env, "E2E_MODEL_KEY": "sk-e2e-dummy"}


class Codex:
    """The ``codex`` binary with a private home, pointed at ``api_url``."""

    def __init__(self, binary: Path, home: Path, api_url: str) -> None:
        self.binary = binary
        self.home = home
        self.api_url = api_url
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        self.config = home / ".codex" / "config.toml"
        self.config.write_text(
            "# the scripted model (tests/e2e/fake_responses.py)\n"
            f'model = "{MODEL}"\nmodel_provider = "e2e"\n'
            'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n\n'
            "[model_providers.e2e]\n"
            f'name = "e2e"\nbase_url = "{api_url}"\nwire_api = "responses"\n'
            'env_key = "E2E_MODEL_KEY"\nrequest_max_retries = 0\n'
            "stream_max_retries = 0\n")

    def env(self) -> dict[str, str]:
        return codex_env(self.home)

    def trust_project(self, repo: Path) -> None:
        with self.config.open("a") as f:
            f.write(f'\n[projects."{repo}"]\ntrust_level = "trusted"\n')

    def argv(self, prompt: str, resume: str | None = None) -> list[str]:
        if resume:
            return [str(self.binary), "exec", "--json", "resume", resume, prompt]
        return [str(self.binary), "exec", "--json", prompt]

    def run(self, repo: Path, prompt: str, *, resume: str | None = None,
            timeout: float = 300) -> Outcome:
        t0 = time.perf_counter()
        proc = subprocess.run(self.argv(prompt, resume), cwd=repo, env=self.env(),
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)

    def start(self, repo: Path, prompt: str, log: Path) -> subprocess.Popen[bytes]:
        """Start ``codex exec`` in a process group of its own (claude.sigkill ends it)."""
        with log.open("wb") as out:
            return subprocess.Popen(self.argv(prompt), cwd=repo, env=self.env(), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    def record_payloads(self, into: Path) -> None:
        """Also run a recorder on every event (user-scope ``~/.codex/hooks.json``,
        trusted like gitwal's): each payload lands in ``into`` as one JSON file."""
        into.mkdir(parents=True, exist_ok=True)
        command = f"sh -c 'cat > \"$(mktemp \"{into}/payload-XXXXXX\")\"'"
        hooks: dict[str, Any] = {}
        for event in EVENTS:
            group: dict[str, Any] = {"hooks": [{"type": "command", "command": command,
                                                "timeout": 30}]}
            if event in ("PreToolUse", "PostToolUse"):
                group["matcher"] = "*"
            hooks[event] = [group]
        path = self.home / ".codex" / "hooks.json"
        path.write_text(json.dumps({"hooks": hooks}, indent=2))
        with self.config.open("a") as f:
            for e in codex_trust.hook_entries(path, {"hooks": hooks}):
                f.write(f'\n[hooks.state."{e.key}"]\ntrusted_hash = "{e.current_hash}"\n')


def payloads(into: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(into.glob("payload-*")):
        data = json.loads(p.read_text())
        assert isinstance(data, dict)
        out.append(data)
    return out


def make_project(path: Path, codex: Codex, files: Mapping[str, str]) -> Path:
    """A repository holding ``files`` and gitwal's Codex hooks (installed and trusted
    with ``git wal install codex --trust``), all in its first commit; the project
    trusted in Codex's config."""
    env = codex.env()
    path.mkdir(parents=True)
    cmd(path, "git", "init", "-q", "-b", "main", env=env)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(text.encode("utf-8"))
    git_wal(path, "install", "codex", "--trust", env=env)
    codex.trust_project(path)
    cmd(path, "git", "add", "-A", env=env)
    cmd(path, "git", "commit", "-q", "-m", "init", env=env)
    return path

