"""Install and remove gitwal's git hooks, chaining to hooks the user had.

The scripts live in ``gitwal/hook_scripts/`` (plain sh + git, so they work
when gitwal is not on PATH at commit time). A hook the user already had is
renamed to ``<name>.gitwal-chained`` and run by ours; uninstall renames it back.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .durable import atomic_write, makedirs_durable
from .errors import WalError

HOOKS = ("pre-commit", "reference-transaction")
MARK = b"# gitwal-managed hook"
CHAINED = ".gitwal-chained"


@dataclass(frozen=True)
class HookChange:
    hook: str
    action: str  # installed | updated | chained | removed | restored | absent


def hooks_dir(cwd: Path) -> Path:
    """Where git looks for hooks here (honours core.hooksPath; works in bare repos)."""
    proc = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=cwd,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise WalError(f"not a git repository: {cwd.resolve()}",
                       "run `git wal hooks` inside a repository (bare ones too)")
    return (cwd / proc.stdout.strip()).resolve()


def script(name: str) -> bytes:
    return resources.files("gitwal").joinpath("hook_scripts", name).read_bytes()


def install(cwd: Path) -> list[HookChange]:
    """Install (or update) every hook; idempotent."""
    d = hooks_dir(cwd)
    if not d.is_dir():
        makedirs_durable(d)
    changes = []
    for name in HOOKS:
        path = d / name
        chained = d / (name + CHAINED)
        action = "installed"
        if path.exists():
            if MARK in path.read_bytes():
                action = "updated"
            elif chained.exists():
                raise WalError(
                    f"{path} is not gitwal's, and {chained.name} exists already",
                    "merge the two hooks by hand, then run `git wal hooks install` again",
                )
            else:
                path.rename(chained)
                action = "chained"
        atomic_write(path, script(name), 0o755, tag="hook")
        changes.append(HookChange(name, action))
    return changes


def uninstall(cwd: Path) -> list[HookChange]:
    """Remove gitwal's hooks and put back the ones they chained to."""
    d = hooks_dir(cwd)
    changes = []
    for name in HOOKS:
        path = d / name
        chained = d / (name + CHAINED)
        if not path.exists() or MARK not in path.read_bytes():
            changes.append(HookChange(name, "absent"))
            continue
        path.unlink()
        if chained.exists():
            chained.rename(path)
            changes.append(HookChange(name, "restored"))
        else:
            changes.append(HookChange(name, "removed"))
    return changes
