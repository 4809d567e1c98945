"""`git wal install|uninstall AGENT`, `git wal hook AGENT`: agents' own tools, logged
through their hook systems (docs/agents.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..agents import claude_version, settings
from ..agents import install as inst
from ..agents.hook import AGENTS, adapter, run_hook
from ..agents.hook_commands import install_groups, missing_launcher
from ..base.errors import EXIT_USAGE, NotARepository, WalError
from ..cloned import File
from ..wal import Wal
from .failures import handled
from .options import JSON
from .stdout import emit_json

AGENT = click.argument("agent", type=click.Choice(AGENTS))
SCOPE = click.option("--scope", default="project", show_default=True,
                     help="Which settings file: project, local (Claude Code) or user.")


def _target(agent: str, scope: str) -> settings.Target:
    top = Wal(".").wt.root if scope != "user" else Path.home()
    return settings.target(agent, scope, top)


def _show(t: settings.Target, changes: list[inst.Change], as_json: bool) -> None:
    if as_json:
        emit_json({"agent": t.agent, "scope": t.scope, "path": str(t.path),
                   "changes": [{"event": c.event, "action": c.action} for c in changes]})
        return
    if not changes:
        click.echo(f"{t.path}: no gitwal hooks")
    for c in changes:
        click.echo(f"{t.path}: {c.event}: {c.action}")


MCP = click.option("--mcp", "with_mcp", is_flag=True,
                   help="Also register `git wal mcp`: .mcp.json (Claude Code, project scope), "
                        "config.toml (Codex), settings.json (Gemini CLI).")


class McpScope(WalError):
    exit_code = EXIT_USAGE


class UsageError(WalError):
    exit_code = EXIT_USAGE


def _mcp_file(agent: str, scope: str) -> File | None:
    """The file --mcp edits besides the hooks' own (None: the same file, Gemini's)."""
    if agent == "gemini":
        return None
    if agent == "codex":
        if scope == "user":
            return File(Path.home() / ".codex" / "config.toml")
        return File.in_tree(Wal(".").wt.root, ".codex/config.toml")
    if scope != "project":
        raise McpScope(
            "--mcp registers the server in the project's .mcp.json (Claude Code only)",
            "use `--scope project`, or register it yourself: "
            "`claude mcp add --scope user gitwal -- git-wal mcp`")
    return File.in_tree(Wal(".").wt.root, ".mcp.json")


@click.command("install")
@AGENT
@SCOPE
@click.option("--in-process", is_flag=True,
              help="Run each hook in its own process (no server; slower).")
@MCP
@click.option("--trust", "trust", is_flag=True,
              help="Codex: also mark gitwal's hooks trusted in ~/.codex/config.toml, as "
                   "trusting them in codex's /hooks does.")
@JSON
@handled
def install_(agent: str, scope: str, in_process: bool, with_mcp: bool, trust: bool,
             as_json: bool) -> None:
    """Add gitwal's hooks to AGENT's settings (idempotent; other hooks are kept)."""
    if trust and agent != "codex":
        raise UsageError(f"--trust is for codex: {agent} has no per-hook trust",
                         f"run `git wal install {agent}` without --trust")
    mcp_file = _mcp_file(agent, scope) if with_mcp else None
    t = _target(agent, scope)
    notes: list[str] = []
    block = False
    if agent == "claude":
        version = claude_version.installed()
        block = claude_version.takes_block(version)
        if not block:
            notes.append(
                f"Claude Code here: {claude_version.version_text(version)}; a gitwal hook "
                "that times out lets the call go on unlogged (`\"onFailure\": \"block\"` "
                "needs Claude Code " + ".".join(map(str, claude_version.BLOCK_SINCE))
                + " or newer on PATH; install it, then run this again)")
    changes = inst.install(t, install_groups(agent, fast=not in_process, block_on_failure=block),
                           notes, mcp=with_mcp and mcp_file is None)
    if mcp_file is not None:
        from ..agents.mcp_entry import merge_codex_toml, merge_mcp_json

        added = (merge_codex_toml if agent == "codex" else merge_mcp_json)(mcp_file)
        changes.append(inst.Change(f"{mcp_file.path.name} gitwal server",
                                   "added" if added else "unchanged"))
    trusted = _trust_codex(t, changes) if trust else None
    _show(t, changes, as_json)
    missing = missing_launcher(fast=not in_process)
    for note in notes + ([missing] if missing else []):
        click.echo(f"warning: {note}", err=True)
    if not as_json:
        if trusted is not None:
            click.echo(trusted)
        for step in inst.next_steps(agent, scope, trusted=trust):
            click.echo(step)


def _trust_codex(t: settings.Target, changes: list[inst.Change]) -> str:
    """Store the trust of gitwal's entries of ``t`` in Codex's config.toml (a change
    named "config.toml hook trust"); one line for people."""
    from ..agents import codex_trust

    entries = codex_trust.hook_entries(t.path, settings.load(t.file))
    changed = codex_trust.trust(entries)
    ours = sum(e.ours for e in entries)
    where = codex_trust.config_path()
    changes.append(inst.Change(f"{where.name} hook trust", "updated" if changed else "unchanged"))
    if not changed:
        return f"{where}: the {ours} gitwal hook(s) of {t.path} were already trusted"
    return f"{where}: trusted {len(changed)} of the {ours} gitwal hook(s) of {t.path}"


@click.command("uninstall")
@AGENT
@SCOPE
@MCP
@JSON
@handled
def uninstall_(agent: str, scope: str, with_mcp: bool, as_json: bool) -> None:
    """Remove exactly gitwal's hooks from AGENT's settings (--mcp: and its MCP entry)."""
    mcp_file = _mcp_file(agent, scope) if with_mcp else None
    t = _target(agent, scope)
    notes: list[str] = []
    changes = inst.uninstall(t, notes, mcp=with_mcp and mcp_file is None)
    for note in notes:
        click.echo(f"warning: {note}", err=True)
    if mcp_file is not None:
        from ..agents.mcp_entry import remove_from_codex_toml, remove_from_mcp_json

        if (remove_from_codex_toml if agent == "codex" else remove_from_mcp_json)(mcp_file):
            changes.append(inst.Change(f"{mcp_file.path.name} gitwal server", "removed"))
    _show(t, changes, as_json)


@click.command("hook", hidden=True)
@AGENT
@click.argument("event", required=False)
def hook(agent: str, event: str | None) -> None:
    """Handle one hook call of AGENT: the payload on stdin (the agent runs this)."""
    data = sys.stdin.buffer.read()
    try:
        code, out, err = run_hook(agent, data, event)
    except Exception as e:  # a bug must not let a call through unlogged by accident
        code, out = 2, ""
        err = (f"gitwal: internal error in the {agent} hook: {type(e).__name__}: {e}; "
               "the call was refused (report it; `git config wal.agent.failOpen true` "
               "lets calls through meanwhile)\n")
        blocking = adapter(agent).BLOCKING
        if event not in blocking and b'"PreToolUse"' not in data and b'"PreCompact"' not in data:
            code = 1
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.stdout.flush()
    sys.exit(code)


@click.command("agent-server")
@click.option("--git-dir", "git_dir", metavar="DIR",
              help="The repository's .git entry (default: the one above the current "
                   "directory).")
@click.option("--idle", type=float, default=None, metavar="SECONDS",
              help="Exit after this many seconds without a request "
                   "(default: `git config wal.agent.serverIdle`, else 900).")
@click.option("--stop", is_flag=True, help="Stop the repository's hook server, if one runs.")
@click.option("--all", "every", is_flag=True,
              help="With --stop: stop every hook server of this user.")
@JSON
@handled
def agent_server(git_dir: str | None, idle: float | None, stop: bool, every: bool,
                 as_json: bool) -> None:
    """The hook server of one repository (the hooks start it; --stop stops it)."""
    from ..agents import client, server, server_stop

    if every and not stop:
        raise UsageError("--all goes with --stop", "`git wal agent-server --stop --all`")
    if stop and every:
        pids = server_stop.stop_all()
        if as_json:
            emit_json({"stopped": pids})
        else:
            click.echo(f"stopped {len(pids)} hook server(s)"
                       + (f": {' '.join(map(str, pids))}" if pids else ""))
        return
    gd = git_dir or client.git_dir(os.getcwd())
    if gd is None:
        raise NotARepository("not in a git working tree",
                             "run it inside the repository, or pass --git-dir")
    if not stop:
        sys.exit(server.serve(gd, idle))
    pid = server_stop.stop(gd)
    if as_json:
        emit_json({"git_dir": os.path.realpath(gd), "stopped": pid})
    else:
        click.echo(f"stopped the hook server (pid {pid})" if pid else
                   "no hook server runs for this repository")
