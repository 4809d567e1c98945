"""The Claude Code plugin in hooks/claude-code: the same hooks as `git wal install
claude`, run through the plugin's copy of the client with gitwal on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitwal.agents import hook_commands, plugin_client
from gitwal.agents.mcp_entry import mcp_json_document

from .test_agent_payloads import claude_run, claude_tool, wal_log

PLUGIN = Path(__file__).resolve().parent.parent / "hooks" / "claude-code"
COMMAND = hook_commands.plugin_command(blocking=True)  # PreToolUse's


def test_the_plugin_declares_the_installed_hooks() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "gitwal"
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert hooks == hook_commands.plugin_groups()
    assert hooks["PreToolUse"][0]["hooks"][0]["command"] == COMMAND
    # The client is generated from the package's (`python -m gitwal.agents.plugin_client`).
    assert (PLUGIN / "scripts" / "gitwal_client.py").read_text() == plugin_client.generate()
    # ... and registers the MCP server exactly as `git wal install claude --mcp` does.
    assert json.loads((PLUGIN / ".mcp.json").read_text()) == mcp_json_document()


def run_plugin_hook(repo: Path, payload: dict[str, object], path: str,
                    command: str = COMMAND) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(PLUGIN), "PATH": path,
           "GITWAL_NO_SERVER": "1"}
    return subprocess.run(["/bin/sh", "-c", command], cwd=repo, input=json.dumps(payload),
                          capture_output=True, text=True, env=env)


def test_the_plugin_hook_logs_with_gitwal_on_path(repo: Path) -> None:
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    r = run_plugin_hook(repo, claude_tool(repo, "PreToolUse", "Write", write, "toolu_p"),
                        os.environ["PATH"])
    assert r.returncode == 0, r.stderr
    [intent] = [x for x in wal_log(repo, claude_run()) if x["type"] == "intent"]
    assert intent["args"]["agent"]["call"] == "toolu_p"


def test_the_plugin_hook_refuses_a_call_when_gitwal_is_missing(repo: Path) -> None:
    bare = repo.parent / "bin"  # python3, and no git-wal
    bare.mkdir()
    (bare / "python3").symlink_to(Path(sys.executable).resolve())
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    r = run_plugin_hook(repo, claude_tool(repo, "PreToolUse", "Write", write, "toolu_p"),
                        f"{bare}{os.pathsep}/usr/bin:/bin")
    assert r.returncode == 2 and "is gitwal installed" in r.stderr, r.stderr


def test_the_plugin_hook_refuses_a_call_when_its_python_fails(repo: Path) -> None:
    # A python3 that dies before the client decides (too old to parse it, a
    # broken install: exit 1 with a traceback) must not let the call through.
    bare = repo.parent / "bin"
    bare.mkdir()
    (bare / "python3").write_text("#!/bin/sh\necho 'SyntaxError: invalid syntax' >&2\nexit 1\n")
    (bare / "python3").chmod(0o755)
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    r = run_plugin_hook(repo, claude_tool(repo, "PreToolUse", "Write", write, "toolu_p"),
                        f"{bare}{os.pathsep}/usr/bin:/bin")
    assert r.returncode == 2, r.stderr
    assert "python3 failed to run (exit 1), so this call cannot be logged" in r.stderr


def test_the_plugin_hook_refuses_a_call_when_python3_is_missing(repo: Path) -> None:
    empty = repo.parent / "only-sh"  # sh, and no python3: exit 127 becomes a refusal
    empty.mkdir()
    (empty / "sh").symlink_to("/bin/sh")
    write = {"file_path": str(repo / "n.txt"), "content": "n\n"}
    r = run_plugin_hook(repo, claude_tool(repo, "PreToolUse", "Write", write, "toolu_p"),
                        str(empty))
    assert r.returncode == 2, r.stderr
    assert "python3 failed to run (exit 127), so this call cannot be logged" in r.stderr
    stop = hook_commands.plugin_command(blocking=False)
    r = run_plugin_hook(repo, {"hook_event_name": "Stop", "session_id": "s", "cwd": str(repo)},
                        str(empty), stop)
    assert r.returncode == 1 and "so this hook call was not logged" in r.stderr
    assert not (repo / "n.txt").exists()
    assert "claude-" not in subprocess.run([sys.executable, "-m", "gitwal", "runs"], cwd=repo,
                                           capture_output=True, text=True).stdout


def test_the_plugin_and_its_marketplace_pass_claude_codes_own_validator() -> None:
    from .e2e.pinned import CLAUDE, find

    found = find(CLAUDE)
    if found.path is None:
        pytest.skip(found.reason)
    root = Path(__file__).resolve().parents[1]
    for target in (root, root / "hooks" / "claude-code"):
        proc = subprocess.run([str(found.path), "plugin", "validate", "--strict", str(target)],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "DISABLE_AUTOUPDATER": "1"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Validation passed" in proc.stdout
    market = json.loads((root / ".claude-plugin" / "marketplace.json").read_text())
    plugin = json.loads((root / "hooks" / "claude-code" / ".claude-plugin" / "plugin.json")
                        .read_text())
    [entry] = market["plugins"]
    assert (entry["name"], entry["version"]) == (plugin["name"], plugin["version"])


def test_the_plugin_ships_an_undo_command_for_the_mcp_undo_tool() -> None:
    text = (PLUGIN / "commands" / "undo.md").read_text()
    head, body = text.split("---\n")[1:3]
    assert "description:" in head and "argument-hint:" in head
    assert "$ARGUMENTS" in body and "dry_run: true" in body
    # It names the tool and the arguments the MCP server really declares.
    from gitwal.mcp import server

    source = Path(server.__file__).read_text()
    assert 'def undo(' in source
    for arg in ("lsns", "last", "turn", "to", "run", "dry_run"):
        assert f"        {arg}: Annotated[" in source, arg
        assert f"`{arg}`" in body or f"`{arg}:" in body, arg
