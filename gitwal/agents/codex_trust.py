"""Codex's trust gates for gitwal's hooks: reading them, and passing them on request.

Codex 0.169.0 runs a hook of ``.codex/hooks.json`` (or ``~/.codex/hooks.json``)
only when both hold (docs/agents.md, Codex CLI):

* the project is trusted: ``[projects."<root>"] trust_level = "trusted"`` in
  ``$CODEX_HOME/config.toml`` (``~/.codex`` by default), for project scope;
* the hook itself is trusted: ``[hooks.state."<key>"] trusted_hash = "<hash>"``
  in that same file, where ``<key>`` is ``<hooks.json path>:<event>:<group
  index>:<handler index>`` (the event in snake case, the indexes counted from
  0 in the file) and ``<hash>`` is ``sha256:`` and the hex SHA-256 of the
  hook's normalized definition: compact JSON with sorted keys of
  ``{"event_name", "matcher" (when the group has one), "hooks": [handler]}``,
  the handler with Codex's defaults filled in (``timeout`` 600, ``async``
  false). A definition whose hash differs from the stored one is "modified"
  and does not run until trusted again.

So one trust entry holds as long as gitwal's command, matcher, timeout and
position stay the same: the command names no path of the machine
(hook_commands.hook_command), so reinstalling or upgrading gitwal keeps it.
:func:`trust` writes exactly the entries ``/hooks`` would write when the user
trusts gitwal's hooks there, and nothing else (never a project's trust, never
another hook's); the file keeps its comments and layout (tomlkit).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import WalError
from . import settings
from .config import codex_home
from .hook_commands import is_ours

DEFAULT_TIMEOUT = 600  # seconds: what Codex assumes for a handler without one


class CodexConfigError(WalError):
    """A Codex config.toml that gitwal cannot read or edit safely."""


@dataclass(frozen=True)
class HookEntry:
    """One command handler of a hooks.json, as Codex names and hashes it."""

    key: str
    event: str
    current_hash: str
    ours: bool  # gitwal's handler (hook_commands.is_ours)


def config_path() -> Path:
    return codex_home() / "config.toml"


def event_label(event: str) -> str:
    """``PreToolUse`` -> ``pre_tool_use``: the name Codex keys and hashes by."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def hook_hash(event: str, matcher: str | None, handler: Mapping[str, Any]) -> str:
    """The hash Codex stores for a trusted command handler of ``event``."""
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    normalized: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        # Codex: the timeout given (600 when none), at least 1 second.
        "timeout": max(1, int(DEFAULT_TIMEOUT if timeout is None else timeout)),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": event_label(event), "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hook_entries(hooks_json: Path, data: Mapping[str, Any]) -> list[HookEntry]:
    """Every command handler of ``data`` (the parsed ``hooks_json``), keyed as Codex
    keys them (by the file's absolute path and each handler's position)."""
    # Codex names the file by its resolved path: it finds a project's from its
    # working directory (which the kernel reports resolved) and canonicalizes
    # CODEX_HOME.
    source = os.path.realpath(hooks_json)
    hooks = data.get("hooks")
    out: list[HookEntry] = []
    if not isinstance(hooks, dict):
        return out
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            matcher = group.get("matcher")
            matcher = matcher if isinstance(matcher, str) else None
            for h, handler in enumerate(group["hooks"]):
                if not isinstance(handler, dict) or handler.get("type") != "command":
                    continue
                out.append(HookEntry(f"{source}:{event_label(str(event))}:{g}:{h}", str(event),
                                     hook_hash(str(event), matcher, handler),
                                     is_ours(handler, "codex")))
    return out


# -- config.toml ----------------------------------------------------------------------


def _load(path: Path) -> Any:
    """Codex's config.toml (the user's own: through cloned/, bounded, links followed)."""
    from ..cloned import File, load_toml, text

    hint = f"fix {path} by hand, then run the command again"
    try:
        data = File(path).read()
    except OSError as e:
        raise CodexConfigError(f"cannot read {path}: {e.strerror or e}", hint) from None
    return load_toml(text(data or b"", path), path, CodexConfigError, hint)


def _table(parent: Any, name: str, path: Path, what: str) -> Any:
    import tomlkit

    got = parent.get(name)
    if got is None:
        got = tomlkit.table(is_super_table=True)
        parent[name] = got
    if not isinstance(got, dict):
        raise CodexConfigError(f"{path}: {what} is not a table",
                               f"fix {path} by hand, then run the command again")
    return got


def trusted_hashes(path: Path | None = None) -> dict[str, str]:
    """key -> the ``trusted_hash`` stored for it (unreadable file: none)."""
    try:
        doc = _load(path or config_path()).unwrap()
    except WalError:  # unreadable, unsafe or not TOML: nothing trusted
        return {}
    state = (doc.get("hooks") or {}).get("state") if isinstance(doc.get("hooks"), dict) else None
    if not isinstance(state, dict):
        return {}
    return {k: str(v["trusted_hash"]) for k, v in state.items()
            if isinstance(v, dict) and isinstance(v.get("trusted_hash"), str)}


def project_trusted(top: Path, path: Path | None = None) -> bool:
    """Whether Codex trusts the project at ``top`` (by its path as given or resolved)."""
    try:
        doc = _load(path or config_path()).unwrap()
    except WalError:  # unreadable, unsafe or not TOML: nothing trusted
        return False
    projects = doc.get("projects")
    if not isinstance(projects, dict):
        return False
    names = {str(top), os.path.realpath(top)}
    return any(isinstance(projects.get(n), dict)
               and projects[n].get("trust_level") == "trusted" for n in names)


def trust(entries: list[HookEntry], path: Path | None = None) -> list[str]:
    """Store the current hash of each of gitwal's ``entries`` as trusted; returns the
    keys that changed. Other keys, tables and comments stay as they were."""
    import tomlkit

    where = path or config_path()
    doc = _load(where)
    hooks = _table(doc, "hooks", where, "hooks")
    state = _table(hooks, "state", where, "hooks.state")
    changed = []
    for e in entries:
        if not e.ours:
            continue  # trusting someone else's hook is the user's call, in /hooks
        current = state.get(e.key)
        if isinstance(current, dict) and current.get("trusted_hash") == e.current_hash:
            continue
        if isinstance(current, dict):
            current["trusted_hash"] = e.current_hash
        else:
            table = tomlkit.table()
            table["trusted_hash"] = e.current_hash
            state[e.key] = table
        changed.append(e.key)
    if changed:
        _store(where, tomlkit.dumps(doc))
    return changed


def _store(path: Path, text: str) -> None:
    from ..cloned import File

    # Codex's config may hold provider settings: private by default.
    File(path).write(text.encode("utf-8"), default_mode=0o600)


# -- what doctor reports ---------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    what: str  # "project trust" | "hook trust"
    ok: bool
    detail: str
    fix: str = ""


def checks(hooks_json: Path, data: Mapping[str, Any], scope: str, top: Path) -> list[Check]:
    """Whether Codex will run gitwal's hooks of ``hooks_json``: project trust (project
    scope) and each gitwal entry's stored trust (missing, or stale: the definition
    changed since it was trusted)."""
    config = config_path()
    out = []
    if scope == "project":
        ok = project_trusted(top, config)
        out.append(Check("project trust", ok, "trusted" if ok else
                         f"{top} is not a trusted project in {config}: codex does not load "
                         ".codex/hooks.json here",
                         "" if ok else "start codex here and trust the project"))
    ours = [e for e in hook_entries(hooks_json, data) if e.ours]
    stored = trusted_hashes(config)
    missing = [e.event for e in ours if e.key not in stored]
    stale = [e.event for e in ours if e.key in stored and stored[e.key] != e.current_hash]
    fix = f"git wal install codex --scope {scope} --trust (or trust them in codex's /hooks)"
    if missing:
        out.append(Check("hook trust", False, f"not trusted by codex, so never run: "
                         f"{', '.join(missing)}", fix))
    if stale:
        out.append(Check("hook trust", False, "trusted before their definition changed "
                         f"(codex skips them as modified): {', '.join(stale)}", fix))
    if ours and not missing and not stale:
        out.append(Check("hook trust", True, f"{len(ours)} hook(s) trusted in {config}"))
    return out


def doctor_checks(scope: str, top: Path) -> list[Check]:
    """:func:`checks` for the hooks file of ``scope`` (``git wal doctor``)."""
    t = settings.target("codex", scope, top)
    try:
        data = settings.load(t.file)
    except WalError as e:
        return [Check("hook trust", False, e.message, e.hint)]
    return checks(t.path, data, scope, top)
