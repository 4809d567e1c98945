"""`git wal install|uninstall AGENT`: merge gitwal's hook entries into an agent's
settings file, and take exactly them out again.

Claude Code, Codex and Gemini CLI share one shape::

    {"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
                                                          "command": "..."}]}]}}

Install removes gitwal's handlers first and then appends one matcher group
per event, so running it twice changes nothing; every other key, event, group
and handler of the file stays as it was (and in its order). A handler is
gitwal's when its command runs gitwal's hook entry point for that agent
(:func:`is_ours`). Files are replaced atomically.

The entries come from the agent's adapter (``Adapter.groups``). For Codex
and Gemini CLI the same entries ship as data, ``hooks/codex/hooks.json`` and
``hooks/gemini/hooks.json`` (package data of ``gitwal._hooks``), in the shape
of the agent's own file with :data:`COMMAND` where the hook command goes; a
test keeps the two equal.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..durable import atomic_write, makedirs_durable
from ..errors import WalError
from .adapter import Groups, adapter

CLIENT = Path(__file__).with_name("hook_client.py")  # runs client.py from its bytecode


class SettingsError(WalError):
    """An agent settings file that gitwal cannot merge into safely."""


@dataclass(frozen=True)
class Target:
    agent: str  # claude | codex | gemini
    scope: str
    path: Path


@dataclass(frozen=True)
class Change:
    event: str
    action: str  # added | updated | unchanged | removed


SCOPES: dict[str, dict[str, tuple[str, str]]] = {
    # agent -> scope -> (base: "tree" | "home", relative path)
    "claude": {"project": ("tree", ".claude/settings.json"),
               "local": ("tree", ".claude/settings.local.json"),
               "user": ("home", ".claude/settings.json")},
    "codex": {"project": ("tree", ".codex/hooks.json"),
              "user": ("home", ".codex/hooks.json")},
    "gemini": {"project": ("tree", ".gemini/settings.json"),
               "user": ("home", ".gemini/settings.json")},
}


def target(agent: str, scope: str, top: Path) -> Target:
    scopes = SCOPES[agent]
    if scope not in scopes:
        raise SettingsError(f"{agent} has no scope {scope!r}",
                            f"scopes for {agent}: {', '.join(scopes)}")
    base, rel = scopes[scope]
    root = top if base == "tree" else Path(os.path.expanduser("~"))
    return Target(agent, scope, root / rel)


COMMAND = "@GITWAL_HOOK_COMMAND@"  # in a shipped definition: where the hook command goes


def groups(agent: str, command: str) -> Groups:
    """The matcher groups ``install`` merges for ``agent``, running ``command``
    (the adapter's; hooks/<agent>/ ships the same entries as data)."""
    return adapter(agent).groups(command)


def hook_command(agent: str, fast: bool = True) -> str:
    """The command an agent runs for every gitwal hook call of ``agent``.

    Absolute paths, so it works whatever the agent's PATH holds. The fast
    form runs the stdlib-only client (server.py does the work); the plain
    form runs the whole hook in process.
    """
    python = shlex.quote(sys.executable)
    if fast and CLIENT.is_file():
        return f"{python} -S -E {shlex.quote(str(CLIENT))} {agent}"
    return f"{python} -m gitwal hook {agent}"


_OURS = re.compile(r"(?:client\.py['\"]?|gitwal['\"]? hook|git-wal['\"]? hook) (\w+)")


def is_ours(handler: Any, agent: str) -> bool:
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str) or ("gitwal" not in command and "git-wal" not in command):
        return False
    m = _OURS.search(command)
    return m is not None and m.group(1) == agent


def load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise SettingsError(f"{path} is not valid JSON ({e})",
                            "fix the file by hand; gitwal does not rewrite what it cannot "
                            "parse") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path} does not hold a JSON object",
                            "fix the file by hand; gitwal does not rewrite it")
    return data


def save(path: Path, data: dict[str, Any]) -> None:
    if not path.parent.is_dir():
        makedirs_durable(path.parent)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    atomic_write(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(),
                 mode, tag="gitwal")


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



def install(t: Target, groups: Groups) -> list[Change]:
    """Merge ``groups`` (event -> a matcher group, or a list of them) into the
    target's file."""
    data = load(t.path)
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
    if json.dumps(data, sort_keys=True) != before or not t.path.exists():
        save(t.path, data)
    return changes


def uninstall(t: Target) -> list[Change]:
    if not t.path.exists():
        return []
    data = load(t.path)
    removed = strip(data, t.agent, t.path)
    if removed:
        save(t.path, data)
    return [Change(e, "removed") for e in removed]
