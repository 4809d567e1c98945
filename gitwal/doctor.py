"""`git wal doctor`: is every integration of this repository working, end to end?

Each check says what it found and, when something is wrong, the fix. The
checks only read, except the agent-hook probe, which runs each installed
hook command once with a payload for a tool gitwal does not log (a read):
the hook answers without logging anything, which proves the command
resolves on this PATH, starts, and reaches gitwal (docs/doctor.md).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base.errors import WalError
from .githooks import install as githooks
from .log.runs import list_runs
from .wal import Wal

PROBE_TIMEOUT = 60.0  # seconds: a first call may start the hook server
# Per agent: (the hook event that can refuse a call, a tool gitwal does not log).
PROBES = {"claude": ("PreToolUse", "Read"), "codex": ("PreToolUse", "read_file"),
          "gemini": ("BeforeTool", "read_file")}
HOOK_OK = ("installed", "chained", "via-manager", "unavailable")


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str
    fix: str = ""


def doctor(cwd: Path) -> list[Finding]:
    """Every check's finding, in a stable order."""
    try:
        wal = Wal(cwd)
    except WalError as e:
        return [Finding("repository", False, e.message, e.hint)]
    top = Path(wal.wt.root)
    return [*_git_hooks(top), *_logs(wal), *_agents(top), *_signing(wal)]


def _git_hooks(top: Path) -> list[Finding]:
    try:
        states = githooks.status(top)
    except WalError as e:
        return [Finding("git hooks", False, e.message, e.hint)]
    out = []
    for s in states:
        if s.action in HOOK_OK:
            detail = s.action + (f" ({s.manager}: {s.config})" if s.config else "")
            out.append(Finding(f"git hook {s.hook}", True, s.why or detail))
        elif s.action in ("add-to-manager", "overwritten"):
            out.append(Finding(f"git hook {s.hook}", False,
                               s.why or f"{s.manager} runs this hook and its {s.config} "
                               "does not run gitwal's",
                               f"add to {s.config}: {s.entry}"))
        else:
            out.append(Finding(f"git hook {s.hook}", False,
                               f"{s.action}: gitwal's {s.hook} hook does not run here",
                               "git wal hooks install"))
    return out


def _logs(wal: Wal) -> list[Finding]:
    out = []
    for run in list_runs(wal.repo):
        try:
            st = wal.status(run)
        except WalError as e:
            out.append(Finding(f"log {run}", False, e.message, e.hint))
            continue
        if st.open:
            out.append(Finding(f"log {run}", True,
                               f"readable; {len(st.open)} open intent(s) "
                               f"(LSN {', '.join(map(str, st.open))})",
                               f"git wal recover --run {run}"))
        else:
            out.append(Finding(f"log {run}", True, f"readable, {st.records} records"))
    return out


def _agents(top: Path) -> list[Finding]:
    from .agents import hook_commands, settings  # only when an agent is looked at

    out = []
    for agent, scopes in settings.SCOPES.items():
        for scope in scopes:
            t = settings.target(agent, scope, top)
            name = f"agent {agent} ({scope}: {t.path})"
            try:
                data, _ = settings.read(t.file, jsonc=agent in settings.JSONC)
            except WalError as e:
                out.append(Finding(name, False, e.message, e.hint))
                continue
            commands = _our_commands(hook_commands, data, agent)
            if not commands:
                continue
            # Only a command this gitwal writes is ever run: a settings file
            # may come with a clone, and doctor runs nothing the local user
            # did not write (docs/security.md).
            known = {str(h.get("command")) for fast in (True, False)
                     for _event, h in _handlers(hook_commands.install_groups(agent, fast))}
            out.append(_portable(name, agent, scope, commands))
            out.append(_probe(name, agent, top, commands, known))
            out.extend(_trust(name, agent, scope, top))
            if agent == "claude":
                out.append(_on_failure(name, scope, data))
            if agent == "gemini":
                from .agents import gemini_trust

                out += [Finding(f"{name}: {c.name}", c.ok, c.detail, c.fix)
                        for c in gemini_trust.checks(top, scope, commands)]
    return out


def _on_failure(name: str, scope: str, data: dict[str, Any]) -> Finding:
    """Does a gitwal hook that times out or crashes refuse Claude Code's call
    (``"onFailure": "block"`` on the events that can refuse one)?"""
    from .agents import claude, claude_version, hook_commands

    check = f"{name}: a failing hook refuses the call"
    ours = [h for event, h in _handlers(data.get("hooks")) if event in claude.BLOCKING
            and hook_commands.is_ours(h, "claude")]
    version = claude_version.installed()
    shown = claude_version.version_text(version)
    if ours and all(h.get(hook_commands.ON_FAILURE) == "block" for h in ours):
        return Finding(check, True, f'"onFailure": "block" on {", ".join(claude.BLOCKING)} '
                       f"(Claude Code here: {shown})")
    if claude_version.takes_block(version):
        return Finding(check, False, f"Claude Code {shown} takes \"onFailure\": \"block\", "
                       "which gitwal's hooks here do not say: a hook that times out lets the "
                       "call go on unlogged", f"git wal install claude --scope {scope}")
    since = ".".join(map(str, claude_version.BLOCK_SINCE))
    return Finding(check, True, f"no (Claude Code here: {shown}; \"onFailure\": \"block\" "
                   f"needs {since} or newer): a hook that times out lets the call go on")


def _handlers(hooks: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, handler) of a settings file's ``hooks`` object, whose events
    hold a list of matcher groups (or one group, as install_groups gives)."""
    if not isinstance(hooks, dict):
        return
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else [groups]:
            for h in group.get("hooks", []) if isinstance(group, dict) else []:
                if isinstance(h, dict):
                    yield str(event), h


def _our_commands(agents: Any, data: dict[str, Any], agent: str) -> dict[str, str]:
    """event -> the command of gitwal's handler for it."""
    found: dict[str, str] = {}
    for event, h in _handlers(data.get("hooks")):
        if agents.is_ours(h, agent):
            found.setdefault(event, str(h["command"]))
    return found


def _portable(name: str, agent: str, scope: str, commands: dict[str, str]) -> Finding:
    fixed = [e for e, c in commands.items() if not c.startswith("sh -c '")]
    if fixed and scope != "user":
        return Finding(f"{name}: commands", False,
                       f"{', '.join(sorted(fixed))} run a path of the machine that installed "
                       "them: on another machine, or after its virtualenv moves, the hook "
                       "fails and the agent goes on unlogged",
                       f"git wal install {agent} --scope {scope}")
    return Finding(f"{name}: commands", True,
                   f"{len(commands)} event(s), resolved on PATH at run time")


def _probe(name: str, agent: str, top: Path, commands: dict[str, str],
           known: set[str]) -> Finding:
    event, tool = PROBES[agent]
    command = commands.get(event)
    if command is None:
        return Finding(f"{name}: probe", False, f"no gitwal hook for {event}: tool calls "
                       "are not logged before they run", f"git wal install {agent}")
    if command not in known:
        return Finding(f"{name}: probe", False,
                       f"not run: the {event} command is not one this gitwal writes (an "
                       "older install, or an edited or foreign entry)",
                       f"git wal install {agent}, then git wal doctor again")
    payload = {"session_id": "gitwal-doctor-probe", "hook_event_name": event,
               "tool_name": tool, "tool_input": {"file_path": "README"},
               "tool_use_id": "gitwal-doctor-probe", "cwd": str(top),
               "transcript_path": ""}
    try:
        proc = subprocess.run(["sh", "-c", command], cwd=top, input=json.dumps(payload),
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return Finding(f"{name}: probe", False,
                       f"the {event} hook did not answer in {PROBE_TIMEOUT:.0f} s",
                       "git wal agent-server --stop, then run git wal doctor again")
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return Finding(f"{name}: probe", False,
                       f"the {event} hook exited {proc.returncode}"
                       + (f": {said[-1]}" if said else ""),
                       "install gitwal where the agent runs (pipx install gitwal), or "
                       f"git wal install {agent} again")
    return Finding(f"{name}: probe", True, f"the {event} hook answered (exit 0)")


def _trust(name: str, agent: str, scope: str, top: Path) -> list[Finding]:
    if agent == "codex":
        from .agents import codex_trust

        return [Finding(f"{name}: {c.what}", c.ok, c.detail, c.fix)
                for c in codex_trust.doctor_checks(scope, top)]
    return []


def _signing(wal: Wal) -> list[Finding]:
    from .signing.signer import configured_signer

    signer = configured_signer(wal.repo)
    if signer is None:
        return []
    try:
        signer.sign(b"gitwal doctor probe\n")
    except (OSError, ValueError, WalError) as e:
        return [Finding("signing key", False, f"{signer.path}: {e}",
                        "git wal keygen, or fix git config wal.signingKey")]
    return [Finding("signing key", True, f"{signer.path} signs ({signer.fingerprint})")]


__all__ = ["Finding", "doctor"]
