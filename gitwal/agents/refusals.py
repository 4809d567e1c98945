"""Tool calls no agent may make, for any agent: a person's decision (`git wal
approve|resolve`) and a change of gitwal's settings (``wal.*`` in git's
config, a git config file, gitwal's secret) (docs/security.md, "What an
agent's tool call cannot do").

A shell call is read as a shell would read it (gitwal/shellwords/guard.py),
so ``CLAUDECODE= git wal approve 3``, ``env -u CLAUDECODE git-wal approve 3``,
``sh -c 'git config wal.done.enforce false'`` or ``echo ... >> .git/config``
are refused alike, and so is a line that cannot be read; an editing tool's
call (Edit, Write, a patch) is refused when a target is a git config file
or under gitwal's private directory. Nothing is logged or run; the reason
tells the model to ask the user.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pygit2

from ..base.repository import common_dir, wal_dir
from ..shellwords.guard import config_file, refusal

__all__ = ["file_refusal", "shell_refusal"]

ASK = ("Nothing was run or logged. This is a person's to do: ask the user to run it "
       "themselves, in their own terminal.")


def shell_refusal(command: str, aliases: Mapping[str, str]) -> str | None:
    why = refusal(command, aliases)
    if why is None:
        return None
    return f"gitwal: this shell call was refused: {why}. {ASK}"


def _protected(repo: pygit2.Repository) -> tuple[set[Path], list[Path]]:
    """The git config files this repository reads, and gitwal's private directory."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = {common_dir(repo) / "config", Path(repo.path) / "config",
             Path(repo.path) / "config.worktree", common_dir(repo) / "config.worktree",
             home / ".gitconfig", xdg / "git" / "config", Path("/etc/gitconfig")}
    return {Path(os.path.realpath(f)) for f in files}, [Path(os.path.realpath(wal_dir(repo)))]


def file_refusal(repo: pygit2.Repository, cwd: Path, paths: Sequence[str]) -> str | None:
    """Why an editing tool may not write ``paths`` (None: it may)."""
    files, dirs = _protected(repo)
    for path in paths:
        real = Path(os.path.realpath(cwd / path))
        if real in files or config_file(path) or any(d == real or d in real.parents
                                                     for d in dirs):
            return (f"gitwal: writing {path} was refused: it is a git config file or "
                    f"gitwal's own state, where gitwal's settings live. {ASK}")
    return None
