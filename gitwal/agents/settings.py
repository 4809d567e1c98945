"""An agent's settings file: where it lives for each scope, and reading and
writing it safely.

It is read and written through cloned/: a link, a file that is not regular or
is too large, text that is not UTF-8 or nests too deep is refused, and a file
is replaced atomically. Gemini CLI's may hold comments: only the members that
change are rewritten in place (jsonc.py), and when that cannot be done the
original is kept beside the rewritten file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import WalError
from ..cloned import File, load_json, text
from .jsonc import edit, strip_comments


class SettingsError(WalError):
    """An agent settings file that gitwal cannot merge into safely."""


@dataclass(frozen=True)
class Target:
    agent: str  # claude | codex | gemini
    scope: str
    path: Path
    top: Path | None = None  # the working tree holding ``path`` (project, local scope)

    @property
    def file(self) -> File:
        """The settings file, read and written through cloned/ (confined to the
        tree for a project's; the user's own, links followed, otherwise)."""
        return File(self.path, self.top)


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
    if agent == "codex" and base == "home":
        from .config import codex_home  # Codex reads $CODEX_HOME/hooks.json

        return Target(agent, scope, codex_home() / "hooks.json")
    if base == "tree":
        return Target(agent, scope, top / rel, top)
    return Target(agent, scope, Path(os.path.expanduser("~")) / rel)


JSONC = ("gemini",)  # agents whose settings files may hold comments


def read(f: File | Path, jsonc: bool = False) -> tuple[dict[str, Any], bool]:
    """The settings object in ``f`` ({} when absent or empty), and whether the
    text held comments (``jsonc``: Gemini CLI's settings may; see jsonc.py).
    Read through cloned/: a link, a file that is not regular or is larger
    than 1 MiB, text that is not UTF-8 or nests too deep is refused."""
    f = f if isinstance(f, File) else File(f)
    data = f.read()
    if data is None:
        return {}, False
    source, commented = text(data, f.path), False
    if jsonc:
        source, commented = strip_comments(source)
    if not source.strip():
        return {}, commented
    parsed = load_json(source, f.path, "JSON with comments" if jsonc else "JSON",
                       SettingsError, "fix the file by hand; gitwal does not rewrite what "
                       "it cannot parse")
    if not isinstance(parsed, dict):
        raise SettingsError(f"{f.path} does not hold a JSON object",
                            "fix the file by hand; gitwal does not rewrite it")
    return parsed, commented


def load(f: File | Path) -> dict[str, Any]:
    return read(f)[0]


def save(f: File, data: dict[str, Any]) -> Path:
    """Write ``data`` to ``f`` (its mode kept); returns the file written."""
    return f.write((json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())


def back_up(f: File, data: bytes) -> Path:
    """Keep ``data`` (the bytes of ``f``, a settings file with comments, which a
    rewrite would drop) in a new file beside it, ``<name>.gitwal-backup[.N]``:
    never one that exists. Returns its path."""
    mode = f.mode() or 0o644
    for n in range(1, 1000):
        backup = f.sibling(f"{f.path.name}.gitwal-backup" + (f".{n}" if n > 1 else ""))
        try:
            backup.create_new(data, mode)
        except FileExistsError:
            continue
        return backup.path
    raise SettingsError(f"{f.path}: no free name for a backup of its comments",
                        f"remove old {f.path.name}.gitwal-backup.* files")


def store(t: Target, data: dict[str, Any], commented: bool, notes: list[str] | None) -> None:
    """Write ``data`` to the target's file; what the user should know (a backup
    of its comments, a link followed) is added to ``notes``."""
    # Only the members that change are rewritten (jsonc.edit), in the file's own
    # indentation, so the user's layout and comments stay; when that cannot be
    # done, a file with comments is kept whole beside the rewritten one.
    f = t.file
    raw = f.read()
    source = text(raw, f.path) if raw is not None else ""
    written: Path | None = None
    if source.strip():
        edited = edit(source, read(f, jsonc=True)[0], data)
        if edited is not None:
            written = f.write(edited.encode("utf-8"))
    if written is None:
        if commented and raw is not None:
            backup = back_up(f, raw)
            if notes is not None:
                notes.append(f"{t.path} held comments that could not be kept in place: the "
                             f"file was rewritten without them; the original is {backup}")
        written = save(f, data)
    # Said only for a link gitwal's own part of the path holds (the file, its
    # directory): a home directory reached through a link is not news.
    linked = t.top is None and (t.path.is_symlink() or t.path.parent.is_symlink())
    if linked and notes is not None:
        notes.append(f"{t.path} leads through a symbolic link: gitwal wrote the file it "
                     f"names, {written}")
