"""`git wal install|uninstall AGENT`: merge gitwal's hook entries into an agent's
settings file, and take exactly them out again.

Claude Code, Codex and Gemini CLI share one shape::

    {"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
                                                          "command": "..."}]}]}}

Install removes gitwal's handlers first and then appends one matcher group
per event, so running it twice changes nothing; every other key, event, group
and handler of the file stays as it was (and in its order). A handler is
gitwal's when its command runs gitwal's hook entry point for that agent
(hook_commands.is_ours). Files are replaced atomically; Gemini CLI's, which may
hold comments, are edited in place where they do (settings.py, jsonc.py).

What each handler runs is hook_commands.py's; where the settings file lives,
and reading and writing it, settings.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .adapter import Groups, adapter
from .hook_commands import is_ours
from .mcp_entry import merge_into, remove_from
from .settings import JSONC, SettingsError, Target, read, store


@dataclass(frozen=True)
class Change:
    event: str
    action: str  # added | updated | unchanged | removed


def _hooks(data: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError(f"{path}: \"hooks\" is not an object",
                            "fix the file by hand; gitwal does not rewrite it")
    return hooks


def strip(data: dict[str, Any], agent: str, path: Path) -> dict[str, list[Any]]:
    """Remove gitwal's handlers for ``agent``; returns what was removed, per event."""
    hooks = _hooks(data, path)
    removed: dict[str, list[Any]] = {}
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            ours = [h for h in inner if is_ours(h, agent)]
            if not ours:
                kept_groups.append(group)
                continue
            removed.setdefault(event, []).append(
                {**group, "hooks": ours})
            rest = [h for h in inner if not is_ours(h, agent)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if "hooks" in data and not hooks:
        del data["hooks"]
    return removed


def install(t: Target, groups: Groups, notes: list[str] | None = None,
            mcp: bool = False) -> list[Change]:
    """Merge ``groups`` (event -> a matcher group, or a list of them) into the
    target's file, and with ``mcp`` gitwal's MCP server into its ``mcpServers``
    (Gemini CLI's settings hold both); what the user should know (a backup) is
    added to ``notes``."""
    data, commented = read(t.file, jsonc=t.agent in JSONC)
    before = json.dumps(data, sort_keys=True)
    removed = strip(data, t.agent, t.path)
    hooks = data.setdefault("hooks", {})
    changes = []
    for event, group in groups.items():
        new = group if isinstance(group, list) else [group]
        hooks.setdefault(event, []).extend(new)
        old = removed.get(event)
        action = "added" if not old else "unchanged" if old == new else "updated"
        changes.append(Change(event, action))
    changes += [Change(e, "removed") for e in removed if e not in groups]
    if mcp:
        _check_servers(data, t.path)
        added = merge_into(data)
        changes.append(Change(f"{t.path.name} gitwal server", "added" if added else "unchanged"))
    if json.dumps(data, sort_keys=True) != before or not t.file.exists():
        store(t, data, commented, notes)
    return changes


def _check_servers(data: dict[str, Any], path: Path) -> None:
    if not isinstance(data.get("mcpServers", {}), dict):
        raise SettingsError(f"{path}: \"mcpServers\" is not an object",
                            "fix the file by hand; gitwal does not rewrite it")


def uninstall(t: Target, notes: list[str] | None = None, mcp: bool = False) -> list[Change]:
    if not t.file.exists():
        return []
    data, commented = read(t.file, jsonc=t.agent in JSONC)
    removed = strip(data, t.agent, t.path)
    changes = [Change(e, "removed") for e in removed]
    if mcp:
        _check_servers(data, t.path)
        if remove_from(data):
            changes.append(Change(f"{t.path.name} gitwal server", "removed"))
    if changes:
        store(t, data, commented, notes)
    return changes


def next_steps(agent: str, scope: str, trusted: bool = False) -> list[str]:
    """What the user must still do before the agent runs the hooks it was given
    (`install` prints it): the agents' own trust gates."""
    if agent == "codex":
        steps = [] if trusted else [
            "Codex runs a hook only once it is trusted: run `git wal install codex "
            f"--scope {scope} --trust` (it stores each gitwal hook's hash under "
            "[hooks.state.\"<hooks.json>:<event>:<group>:<handler>\"] trusted_hash in "
            "~/.codex/config.toml, as /hooks does), or start codex, open /hooks and trust "
            "the gitwal hooks. The trust holds until a hook's definition changes "
            "(`git wal doctor` says when)."]
        if scope == "project":
            steps.append("Codex loads .codex/hooks.json only in a trusted project: trust "
                         "this project when codex asks.")
        steps.append("Hooks are on by default; `[features] hooks = false` in a config.toml "
                     "turns them off (`codex_hooks` is the old name of that key).")
        return steps
    if agent == "gemini":
        steps = [adapter(agent).INSTALL_NOTE] if adapter(agent).INSTALL_NOTE else []
        if scope == "project":
            steps.append("Trust this folder: Gemini CLI ignores .gemini/settings.json "
                         "(so gitwal's hooks) in a folder it does not trust, a headless "
                         "`gemini -p` refuses to run there, and --skip-trust drops the "
                         "project's settings. Run gemini here once and choose \"Trust "
                         "folder\" (or add it to ~/.gemini/trustedFolders.json as "
                         "TRUST_FOLDER); `git wal doctor` checks it.")
        return steps
    return []
