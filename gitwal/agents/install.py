"""`git wal install|uninstall AGENT`: merge gitwal's hook entries into an agent's
settings file, and take exactly them out again.

Claude Code, Codex and Gemini CLI share one shape::

    {"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
                                                          "command": "..."}]}]}}

Install removes gitwal's handlers first and then appends one matcher group
per event, so running it twice changes nothing; every other key, event, group
and handler of the file stays as it was (and in its order). A handler is
gitwal's when its command runs gitwal's hook entry point for that agent
(:func:`is_ours`). Files are replaced atomically; Gemini CLI's, which may
hold comments, are edited in place where they do (jsonc.py).

Every handler runs :func:`hook_command` for its event: a ``sh -c`` string
with no path of this machine in it, so a committed settings file works for
every teammate (launch.py runs the client fast from PATH).

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
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import WalError
from ..cloned import File, load_json, text
from . import launch
from .adapter import Groups, adapter
from .jsonc import edit, strip_comments
from .mcp_entry import merge_into, remove_from


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
    if agent == "codex" and base == "home":
        from .config import codex_home  # Codex reads $CODEX_HOME/hooks.json

        return Target(agent, scope, codex_home() / "hooks.json")
    if base == "tree":
        return Target(agent, scope, top / rel, top)
    return Target(agent, scope, Path(os.path.expanduser("~")) / rel)


JSONC = ("gemini",)  # agents whose settings files may hold comments

COMMAND = "@GITWAL_HOOK_COMMAND@"  # in a shipped definition: where the hook command goes


def groups(agent: str, command: str) -> Groups:
    """The matcher groups ``install`` merges for ``agent``, running ``command``
    (the adapter's; hooks/<agent>/ ships the same entries as data)."""
    return adapter(agent).groups(command)


def hook_command(agent: str, fast: bool = True, blocking: bool = True) -> str:
    """The command an agent runs for a gitwal hook of ``agent``: one ``sh -c``
    string that names no path of this machine, so a committed settings file
    works on every machine that has gitwal (docs/agents.md, "What install
    writes").

    The fast form looks ``git-wal-hook`` up on PATH and runs the client of that
    install straight from the launch cache (launch.py), or through
    ``git-wal-hook`` when the cache has no usable record for it; the in-process
    form runs ``git-wal hook AGENT``. Without gitwal on PATH, or when it cannot
    run (exit 126 or 127: its python is gone; for an event that can refuse a
    call, any exit but 0 and 2: e.g. a python that cannot import gitwal), the
    command fails closed for an event that can refuse a call (``blocking``:
    exit 2, which the agents treat as a refusal) and with a visible
    non-blocking error (exit 1) otherwise (an exit 2 at ``Stop`` would keep the
    agent going), and says what to install or how to remove the hooks.

    It runs under ``sh``, whatever shell the agent uses (Claude Code and
    Gemini CLI use bash, Codex the user's login shell, which may be fish): the
    text inside the single quotes holds no single quote and no backslash.
    """
    code = 2 if blocking else 1
    what = ("so this call cannot be logged and is refused" if blocking
            else "so this hook call was not logged")
    fix = (f"Install gitwal where this agent finds it (pipx install gitwal), "
           f"or remove the gitwal hooks (git wal uninstall {agent}).")
    name = "git-wal-hook" if fast else "git-wal"
    found = (f'h=$(command -v {name}) || {{ echo "gitwal: {name} is not on PATH, {what}. '
             f'{fix}" >&2; exit {code}; }}; r=; ')
    # No exec: the exit status must come back here to be checked below.
    cached = ('f="${XDG_CACHE_HOME:-$HOME/.cache}/gitwal/' + launch.CACHE_NAME + '"; '
              'if [ -f "$f" ]; then while IFS= read -r k <&3 && IFS= read -r p <&3 && '
              'IFS= read -r c <&3; do if [ "$k" = "$h" ] && [ -x "$p" ] && [ -f "$c" ]; '
              f'then "$p" -S -E "$c" {agent} 3<&-; r=$?; break; fi; done 3<"$f"; fi; ')
    run = (f'[ -n "$r" ] || {{ "$h" {agent}; r=$?; }}; ' if fast
           else f'"$h" hook {agent}; r=$?; ')
    broken = _checked(name, blocking, fix)
    return "sh -c '" + found + (cached if fast else "") + run + broken + "'"


def install_groups(agent: str, fast: bool = True) -> Groups:
    """What ``install`` merges: the adapter's groups, each handler running
    :func:`hook_command` for its event (blocking or not)."""
    blocking = adapter(agent).BLOCKING
    return {event: _with_command(group, hook_command(agent, fast, event in blocking))
            for event, group in groups(agent, COMMAND).items()}


def plugin_command(blocking: bool = True) -> str:
    """The Claude Code plugin's command (hooks/claude-code): its own copy of the
    client, run by the ``python3`` on PATH, finding ``git-wal`` on PATH. The
    client refuses a blocking call when ``git-wal`` cannot be run; this wrapper
    does the same when ``python3`` itself cannot (exit 126 or 127)."""
    run = ("python3 -S -E \"${CLAUDE_PLUGIN_ROOT}/scripts/gitwal_client.py\" claude "
           "--git-wal git-wal; r=$?; ")
    fix = "Install Python 3 and gitwal (pipx install gitwal), or disable the gitwal plugin."
    return "sh -c '" + run + _checked("python3", blocking, fix) + "'"


def _checked(name: str, blocking: bool, fix: str) -> str:
    """The end of a hook command: how the exit status ``$r`` of ``name`` reaches
    the agent.

    A hook that can refuse a call answers 0 (go on) or 2 (refused); anything
    else means gitwal did not run at all (126/127: its python is gone; 1: a
    python that cannot import gitwal), and an unlogged change must not go
    through: exit 2. Any other hook passes its status on, except that 126/127
    gets a message saying what to do.
    """
    if blocking:
        return (f'case $r in 0|2) exit $r;; esac; echo "gitwal: {name} failed to run '
                f'(exit $r), so this call cannot be logged and is refused. {fix}" >&2; exit 2')
    return (f'case $r in 126|127) echo "gitwal: {name} could not be started (exit $r), so '
            f'this hook call was not logged. {fix}" >&2; exit 1;; esac; exit $r')


def plugin_groups() -> Groups:
    """The hooks of the Claude Code plugin (hooks/claude-code/hooks/hooks.json)."""
    blocking = adapter("claude").BLOCKING
    return {event: _with_command(group, plugin_command(event in blocking))
            for event, group in groups("claude", COMMAND).items()}


def _with_command(group: Any, command: str) -> Any:
    return json.loads(json.dumps(group).replace(json.dumps(COMMAND), json.dumps(command)))


# A handler gitwal wrote before its commands were portable: an absolute path
# to the client, or `python -m gitwal hook AGENT`.
_OLD = re.compile(r"(?:client\.py['\"]?|gitwal['\"]? hook|git-wal['\"]? hook) (\w+)")
_NEW = re.compile(r"\(git wal uninstall (\w+)\)\.")


def is_ours(handler: Any, agent: str) -> bool:
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str) or ("gitwal" not in command and "git-wal" not in command):
        return False
    if command.startswith("sh -c '") and "git-wal" in command:
        found = {m.group(1) for m in _NEW.finditer(command)}
        return found == {agent}
    m = _OLD.search(command)
    return m is not None and m.group(1) == agent


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


def _store(t: Target, data: dict[str, Any], commented: bool, notes: list[str] | None) -> None:
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
        _store(t, data, commented, notes)
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
        _store(t, data, commented, notes)
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


def missing_launcher(fast: bool = True) -> str | None:
    """A warning when the command the hooks run is not on this PATH (None when it is)."""
    name = "git-wal-hook" if fast else "git-wal"
    if shutil.which(name):
        return None
    return (f"{name} is not on PATH here: the hooks refuse calls until it is where the "
            "agent runs (install gitwal with `pipx install gitwal`, or put its bin "
            "directory on PATH)")
