"""Will Gemini CLI run the hooks gitwal installed here? (``git wal doctor``)

Gemini CLI 0.61.0 loads a project's ``.gemini/settings.json``, hooks
included, only in a trusted folder. It decides, in this order:

1. ``GEMINI_RESTRICTED_MODE=true`` or ``GEMINI_CLI_TRUST_WORKSPACE=false``:
   untrusted; ``GEMINI_CLI_TRUST_WORKSPACE=true``: trusted;
2. ``security.folderTrust.enabled`` false (default true): trusted;
3. ``trustedFolders.json`` (``$GEMINI_CLI_TRUSTED_FOLDERS_PATH``, else
   ``~/.gemini/``, home being ``$GEMINI_CLI_HOME`` if set): the rule with the
   longest path that contains the folder (``TRUST_PARENT`` stands for its
   path's parent) says ``TRUST_FOLDER``/``TRUST_PARENT`` (trusted) or
   ``DO_NOT_TRUST``; no rule: undecided, and a headless ``gemini -p`` refuses
   to start (``--skip-trust`` starts it but drops the project's settings).

Hooks run at all only while ``hooksConfig.enabled`` is not false, and a hook
whose name or command is listed in ``hooksConfig.disabled`` never runs.
Only this process's environment is seen: the agent's may differ.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import WalError
from ..cloned import File, load_json, text
from .jsonc import strip_comments

__all__ = ["Check", "checks", "home", "layers", "read", "setting"]

TRUST_FIX = ("run gemini here and choose \"Trust folder\" (or add the folder to "
             "trustedFolders.json as TRUST_FOLDER); --skip-trust does not load project hooks")


@dataclass(frozen=True)
class Check:
    name: str  # "folder trust", "hooks enabled"
    ok: bool
    detail: str
    fix: str = ""


def home(env: dict[str, str]) -> Path:
    return Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or os.path.expanduser("~"))


def read(f: File | Path) -> tuple[Any, str | None]:
    """A JSON-with-comments file: (data, None), ({}, None) when absent, or the error.
    Read through cloned/: the project's file confined to the tree, any file
    bounded, regular, UTF-8 and not nested too deep."""
    f = f if isinstance(f, File) else File(f)
    try:
        raw = f.read()
        if raw is None:
            return {}, None
        return load_json(strip_comments(text(raw, f.path))[0] or "{}", f.path,
                         "JSON with comments"), None
    except OSError as e:
        return {}, f"{f.path}: {e.strerror or e}"
    except WalError as e:
        return {}, e.message


def _get(data: Any, *keys: str) -> Any:
    for k in keys:
        data = data.get(k) if isinstance(data, dict) else None
    return data


def layers(top: Path | None, env: Mapping[str, str]) -> list[File]:
    """Gemini's settings files, weakest first: system defaults, user, the project's
    (``top``; Gemini reads it only in a trusted folder), system."""
    system = Path(env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or (
        "/Library/Application Support/GeminiCli/settings.json" if sys.platform == "darwin"
        else "/etc/gemini-cli/settings.json"))
    defaults = Path(env.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH")
                    or system.parent / "system-defaults.json")
    # The project's file may come with a clone: confined to the tree.
    project = [File.in_tree(top, ".gemini/settings.json")] if top is not None else []
    return [File(defaults), File(home(dict(env)) / ".gemini" / "settings.json"), *project,
            File(system)]


def setting(files: list[File], *keys: str) -> tuple[Any, Path | None]:
    """The value the strongest file that sets ``keys`` gives, and that file."""
    found: tuple[Any, Path | None] = (None, None)
    for f in files:
        value = _get(read(f)[0], *keys)
        if value is not None:
            found = (value, f.path)
    return found


def _real(p: str) -> Path:
    try:
        return Path(os.path.realpath(p)) if os.path.exists(p) else Path(os.path.normpath(p))
    except OSError:
        return Path(p)


def trust(top: Path, env: dict[str, str]) -> Check:
    name = "folder trust"
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get(
            "GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return Check(name, False, "this environment marks every folder untrusted "
                     "(GEMINI_RESTRICTED_MODE / GEMINI_CLI_TRUST_WORKSPACE=false)",
                     "unset them where gemini runs")
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return Check(name, True, "trusted by GEMINI_CLI_TRUST_WORKSPACE=true in this "
                     "environment (only where gemini is started with it)")
    # Decided before the project's settings are read: they cannot turn it off.
    enabled, where = setting(layers(None, env), "security", "folderTrust", "enabled")
    if enabled is False:
        return Check(name, True, f"folder trust is off ({where}): gemini loads "
                     ".gemini/settings.json in every folder")
    path = Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
                or home(env) / ".gemini" / "trustedFolders.json")
    rules, error = read(path)
    if error:
        return Check(name, False, f"gemini refuses to start while {error}",
                     f"fix or remove {path}")
    here = _real(str(top))
    best: tuple[int, str, str] | None = None
    for rule, level in (rules.items() if isinstance(rules, dict) else []):
        where = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
        base = _real(where)
        if (here == base or base in here.parents) and (best is None or len(rule) > best[0]):
            best = (len(rule), rule, str(level))
    if best and best[2] in ("TRUST_FOLDER", "TRUST_PARENT"):
        return Check(name, True, f"trusted ({best[2]} {best[1]} in {path})")
    if best and best[2] == "DO_NOT_TRUST":
        return Check(name, False, f"{path} says DO_NOT_TRUST for {best[1]}: gemini ignores "
                     ".gemini/settings.json here, gitwal's hooks included", TRUST_FIX)
    return Check(name, False, f"{here} is not in {path}: a headless gemini refuses to run "
                 "here, and with --skip-trust it ignores .gemini/settings.json, gitwal's "
                 "hooks included", TRUST_FIX)


def hooks_enabled(top: Path, env: dict[str, str], ours: dict[str, str]) -> Check:
    """``ours``: event -> gitwal's handler command (its name is ``gitwal-<event>``)."""
    name = "hooks enabled"
    files = layers(top, env)
    enabled, where = setting(files, "hooksConfig", "enabled")
    disabled: list[str] = []
    for f in files:  # Gemini joins the lists of every file
        listed = _get(read(f)[0], "hooksConfig", "disabled")
        if isinstance(listed, list):
            disabled += [str(x) for x in listed]
    if enabled is False:
        return Check(name, False, f"hooksConfig.enabled is false in {where}: gemini runs no "
                     "hook, so no call is logged", f"remove hooksConfig.enabled from {where}")
    off = sorted(e for e, c in ours.items() if f"gitwal-{e}" in disabled or c in disabled)
    if off:
        return Check(name, False, f"hooksConfig.disabled lists gitwal's {', '.join(off)} "
                     "hook(s): gemini skips them", "remove them from hooksConfig.disabled")
    return Check(name, True, "hooks are on (hooksConfig)")


def checks(top: Path, scope: str, ours: dict[str, str],
           env: dict[str, str] | None = None) -> list[Check]:
    env = dict(os.environ) if env is None else env
    out = [trust(top, env)] if scope == "project" else []
    return [*out, hooks_enabled(top, env, ours)]
