"""Install and remove gitwal's git hooks, chaining to hooks the user had.

The scripts live in ``hooks/git/`` of the source, installed as package data
of ``gitwal._hooks`` (plain sh + git, so they work when gitwal is not on PATH
at commit time). A hook the user already had is
renamed to ``<name>.gitwal-chained`` and run by ours; uninstall renames it back.

A working repository gets ``pre-commit`` and ``reference-transaction``; a bare
one (a server) gets ``pre-receive`` only: no commit is made there, and the
reference-transaction hook would refuse the compaction pushes pre-receive
lets through (and report every refused push a second time).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..durable import atomic_write, makedirs_durable
from ..errors import WalError
from ..repository import open_repository
from ..signing.appends import signature_problems

HOOKS = ("pre-commit", "reference-transaction")  # a working repository's
SERVER_HOOKS = ("pre-receive",)  # a bare repository's
ALL_HOOKS = HOOKS + SERVER_HOOKS
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


def is_bare(cwd: Path) -> bool:
    proc = subprocess.run(["git", "rev-parse", "--is-bare-repository"], cwd=cwd,
                          capture_output=True, text=True)
    return proc.stdout.strip() == "true"


def script(name: str) -> bytes:
    """The bytes of gitwal's hook ``name`` (one of ALL_HOOKS), as shipped."""
    return resources.files("gitwal._hooks").joinpath("git", name).read_bytes()


def install(cwd: Path) -> list[HookChange]:
    """Install (or update) the hooks this kind of repository needs; idempotent."""
    d = hooks_dir(cwd)
    if not d.is_dir():
        makedirs_durable(d)
    bare = is_bare(cwd)
    changes = []
    for name in SERVER_HOOKS if bare else HOOKS:
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
    if bare:
        # An earlier install put the working-repository hooks here.
        changes += [c for c in _remove(d, HOOKS) if c.action != "absent"]
    return changes


def uninstall(cwd: Path) -> list[HookChange]:
    """Remove gitwal's hooks and put back the ones they chained to."""
    d = hooks_dir(cwd)
    names = SERVER_HOOKS if is_bare(cwd) else HOOKS
    # Report the hooks this kind of repository gets, and any other one found.
    return [c for c in _remove(d, ALL_HOOKS) if c.hook in names or c.action != "absent"]


def _remove(d: Path, names: tuple[str, ...]) -> list[HookChange]:
    changes = []
    for name in names:
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


def push_signature_problems(cwd: Path, appends: Sequence[tuple[str, str]],
                            allowed_signers: Path | None,
                            require_signed: bool) -> list[tuple[str, str, str]]:
    """(ref, commit, why) for each pushed append whose signature is missing or untrusted.

    Runs inside the pre-receive hook: the pushed objects are still in the
    quarantine directory git names in GIT_QUARANTINE_PATH, which libgit2 does
    not read by itself. A missing or malformed allowed-signers file raises
    (the push is refused: fail closed).
    """
    repo = open_repository(cwd)
    quarantine = os.environ.get("GIT_QUARANTINE_PATH")
    if quarantine:
        repo.odb.add_disk_alternate(quarantine)
    ref_of: dict[str, str] = {}
    for ref, commit in appends:
        ref_of.setdefault(commit, ref)
    problems = signature_problems(repo, list(ref_of), allowed_signers, require_signed)
    return [(ref_of[commit], commit, why) for commit, why in problems]
