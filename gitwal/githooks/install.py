"""Install and remove gitwal's git hooks, chaining to hooks the user had.

The scripts live in ``hooks/git/`` of the source, installed as package data
of ``gitwal._hooks`` (plain sh + git, so they work when gitwal is not on PATH
at commit time). A hook the user already had is
renamed to ``<name>.gitwal-chained`` and run by ours; uninstall renames it back.

A working repository gets ``pre-commit`` and ``reference-transaction``; a bare
one (a server) gets ``pre-receive`` only: no commit is made there, and the
reference-transaction hook would refuse the compaction pushes pre-receive
lets through (and report every refused push a second time).

Where a hook manager (managers.py) runs a hook, or the hooks directory is
generated or tracked, gitwal writes nothing there: it reports the entry to
add to the manager's configuration instead (action ``add-to-manager``, or
``via-manager`` once it is there), which runs ``git wal hooks run <hook>``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..base.durable import atomic_write, makedirs_durable
from ..base.errors import WalError
from ..base.repository import open_repository
from ..trust.signatures import signature_problems
from .managers import Manager, detect

HOOKS = ("pre-commit", "reference-transaction")  # a working repository's
SERVER_HOOKS = ("pre-receive",)  # a bare repository's
ALL_HOOKS = HOOKS + SERVER_HOOKS
MARK = b"# gitwal-managed hook"
CHAINED = ".gitwal-chained"


@dataclass(frozen=True)
class HookChange:
    hook: str
    # installed | updated | chained | removed | restored | absent, or, where a
    # manager runs the hook: add-to-manager | via-manager | unavailable
    action: str
    manager: str | None = None
    config: str | None = None  # the manager's file to edit
    entry: str | None = None  # what to add there
    why: str | None = None  # unavailable: why gitwal cannot install it here


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


def script_path(name: str) -> Path:
    """The file of gitwal's hook ``name`` as installed with the package."""
    with resources.as_file(resources.files("gitwal._hooks").joinpath("git", name)) as p:
        return Path(p)


def script(name: str) -> bytes:
    """The bytes of gitwal's hook ``name`` (one of ALL_HOOKS), as shipped."""
    return resources.files("gitwal._hooks").joinpath("git", name).read_bytes()


def install(cwd: Path) -> list[HookChange]:
    """Install (or update) the hooks this kind of repository needs; idempotent."""
    d = hooks_dir(cwd)
    if not d.is_dir():
        makedirs_durable(d)
    bare = is_bare(cwd)
    manager = None if bare else detect(toplevel(cwd), d)
    changes = []
    for name in SERVER_HOOKS if bare else HOOKS:
        if manager is not None and (name in manager.manages or name in manager.unavailable):
            changes.append(_managed(cwd, manager, name))
            continue
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


def _managed(cwd: Path, manager: Manager, name: str) -> HookChange:
    if name in manager.unavailable:
        return HookChange(name, "unavailable", manager.name, why=manager.unavailable[name])
    wired = manager.wired(toplevel(cwd), name)
    return HookChange(name, "via-manager" if wired else "add-to-manager", manager.name,
                      manager.config_of(name), manager.entry(name))


def toplevel(cwd: Path) -> Path:
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd,
                          capture_output=True, text=True)
    return Path(proc.stdout.strip()) if proc.returncode == 0 else cwd.resolve()


def status(cwd: Path) -> list[HookChange]:
    """What runs each of gitwal's hooks here, as :func:`install` would leave it;
    ``action`` is one of installed | chained | via-manager | add-to-manager |
    unavailable | missing | foreign (another script there, gitwal's not run) |
    overwritten (a manager renamed gitwal's script away: ``why`` names it)."""
    d = hooks_dir(cwd)
    bare = is_bare(cwd)
    manager = None if bare else detect(toplevel(cwd), d)
    out = []
    for name in SERVER_HOOKS if bare else HOOKS:
        if manager is not None and (name in manager.manages or name in manager.unavailable):
            change = _managed(cwd, manager, name)
            moved = _renamed_away(d, name)
            if change.action == "add-to-manager" and moved:
                change = HookChange(name, "overwritten", change.manager, change.config,
                                    change.entry, f"gitwal's script was renamed to {moved} "
                                    f"by {manager.name}, which does not run it")
            out.append(change)
            continue
        path = d / name
        text = path.read_bytes() if path.is_file() else b""
        if MARK in text:
            chained = (d / (name + CHAINED)).exists()
            out.append(HookChange(name, "chained" if chained else "installed"))
        elif moved := _renamed_away(d, name):
            out.append(HookChange(name, "overwritten", why=f"gitwal's script was renamed to "
                                  f"{moved}, which git does not run"))
        else:
            out.append(HookChange(name, "foreign" if text else "missing"))
    return out


def _renamed_away(d: Path, name: str) -> str | None:
    """gitwal's script, renamed by a manager that took the hook's place."""
    for suffix in (".old", ".legacy"):
        moved = d / (name + suffix)
        if moved.is_file() and MARK in moved.read_bytes():
            return moved.name
    return None


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
