"""What each gitwal hook handler runs, and which handlers are gitwal's.

Every handler runs :func:`hook_command` for its event: a ``sh -c`` string
with no path of this machine in it, so a committed settings file works for
every teammate (launch.py runs the client fast from PATH). A handler is
gitwal's when its command runs gitwal's hook entry point for that agent
(:func:`is_ours`).

The entries come from the agent's adapter (``Adapter.groups``). For Codex
and Gemini CLI the same entries ship as data, ``hooks/codex/hooks.json`` and
``hooks/gemini/hooks.json`` (package data of ``gitwal._hooks``), in the shape
of the agent's own file with :data:`COMMAND` where the hook command goes; a
test keeps the two equal.
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

from . import launch
from .adapter import Groups, adapter

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


def install_groups(agent: str, fast: bool = True, block_on_failure: bool = False) -> Groups:
    """What ``install`` merges: the adapter's groups, each handler running
    :func:`hook_command` for its event (blocking or not). ``block_on_failure``
    (Claude Code that takes it, claude_version.py): the handlers of events
    that can refuse a call say ``"onFailure": "block"``, so a hook that times
    out or crashes refuses the call instead of letting it go on unlogged."""
    blocking = adapter(agent).BLOCKING
    out: dict[str, Any] = {
        event: _with_command(group, hook_command(agent, fast, event in blocking))
        for event, group in groups(agent, COMMAND).items()}
    if block_on_failure:
        for event in blocking:
            found = out.get(event)
            for group in found if isinstance(found, list) else [found] if found else []:
                for handler in group.get("hooks", []):
                    handler[ON_FAILURE] = "block"
    return out


ON_FAILURE = "onFailure"  # Claude Code's handler key: "continue" (its default) or "block"


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


def missing_launcher(fast: bool = True) -> str | None:
    """A warning when the command the hooks run is not on this PATH (None when it is)."""
    name = "git-wal-hook" if fast else "git-wal"
    if shutil.which(name):
        return None
    return (f"{name} is not on PATH here: the hooks refuse calls until it is where the "
            "agent runs (install gitwal with `pipx install gitwal`, or put its bin "
            "directory on PATH)")
