"""`git wal install|uninstall AGENT`: merged into the agents' real settings files,
idempotent, and the user's own entries untouched."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import hook_commands

from .conftest import ok, wal

ROOT = Path(__file__).resolve().parent.parent

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./block-rm.sh"}]},
        ],
        "PostToolUse": [
            {"matcher": "Edit|Write",
             "hooks": [{"type": "command", "command": "npx prettier --write .",
                        "timeout": 30}]},
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
    },
}


def settings(repo: Path, name: str = "settings.json") -> dict[str, Any]:
    data = json.loads((repo / ".claude" / name).read_text())
    assert isinstance(data, dict)
    return data


def commands(data: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in data.get("hooks", {}).get(event, []) for h in g["hooks"]]


def test_install_merges_and_is_idempotent(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=4))
    out = ok(repo, "install", "claude")
    assert "PreToolUse: added" in out
    first = settings(repo)
    assert first["model"] == "opus" and first["permissions"] == USER_SETTINGS["permissions"]
    assert commands(first, "PreToolUse")[0] == "./block-rm.sh"
    ours = commands(first, "PreToolUse")[1]
    assert ours == hook_commands.hook_command("claude", blocking=True)
    assert commands(first, "Notification") == ["notify-send hi"]
    # An event that can refuse a call fails closed without gitwal (exit 2); the
    # others report it without blocking (an exit 2 at Stop would keep the agent going).
    assert hook_commands.hook_command("claude", blocking=False) != ours
    for event, blocking in (("PostToolUse", False), ("PostToolUseFailure", False),
                            ("SessionStart", False), ("PreCompact", True), ("Stop", False)):
        assert hook_commands.hook_command("claude", blocking=blocking) in commands(first, event)
    pre = first["hooks"]["PreToolUse"][1]
    assert pre["matcher"] == "Edit|MultiEdit|Write|NotebookEdit|Bash|PowerShell"
    assert "matcher" not in first["hooks"]["SessionStart"][0]
    # A file tool's PostToolUse runs in the background; a shell call's does not.
    post = first["hooks"]["PostToolUse"]
    assert post[0] == USER_SETTINGS["hooks"]["PostToolUse"][0]
    assert [(g["matcher"], g["hooks"][0].get("async")) for g in post[1:]] == [
        ("Edit|MultiEdit|Write|NotebookEdit", True), ("Bash|PowerShell", None)]
    assert all("async" not in g["hooks"][0] for e in ("PreToolUse", "PostToolUseFailure")
               for g in first["hooks"][e])
    raw = (repo / ".claude" / "settings.json").read_text()
    again = json.loads(ok(repo, "install", "claude", "--json"))
    assert {c["action"] for c in again["changes"]} == {"unchanged"}
    assert (repo / ".claude" / "settings.json").read_text() == raw


def test_uninstall_removes_exactly_gitwals_entries(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS))
    ok(repo, "install", "claude")
    out = ok(repo, "uninstall", "claude")
    assert "PreToolUse: removed" in out
    assert settings(repo) == USER_SETTINGS
    assert "no gitwal hooks" in ok(repo, "uninstall", "claude")
    assert settings(repo) == USER_SETTINGS


def test_a_user_handler_in_the_same_group_survives(repo: Path) -> None:
    ok(repo, "install", "claude")
    data = settings(repo)
    data["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "say done"})
    (repo / ".claude" / "settings.json").write_text(json.dumps(data))
    ok(repo, "uninstall", "claude")
    assert settings(repo) == {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "say done"}]}]}}


@pytest.mark.parametrize(("scope", "where"), [
    ("local", ".claude/settings.local.json"), ("user", "HOME/.claude/settings.json")])
def test_scopes(repo: Path, scope: str, where: str) -> None:
    ok(repo, "install", "claude", "--scope", scope)
    path = Path(where.replace("HOME", os.environ["HOME"])) if where.startswith("HOME") \
        else repo / where
    assert "gitwal" in json.dumps(json.loads(path.read_text()))
    assert not (repo / ".claude" / "settings.json").exists()
    ok(repo, "uninstall", "claude", "--scope", scope)
    assert json.loads(path.read_text()) == {}


def test_unparseable_settings_are_refused_not_rewritten(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text("{ this is not json")
    proc = wal(repo, "install", "claude")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error:") and "hint:" in proc.stderr
    assert (repo / ".claude" / "settings.json").read_text() == "{ this is not json"
    bad_scope = wal(repo, "install", "claude", "--scope", "galaxy")
    assert bad_scope.returncode == 1 and "scopes for claude" in bad_scope.stderr


def test_the_installed_command_runs_the_hook(repo: Path) -> None:
    import subprocess

    ok(repo, "install", "claude")
    command = commands(settings(repo), "PreToolUse")[-1]
    payload = {"session_id": "s", "transcript_path": "/t", "cwd": str(repo),
               "hook_event_name": "PreToolUse", "tool_name": "Write",
               "tool_input": {"file_path": str(repo / "n.txt"), "content": "n\n"},
               "tool_use_id": "toolu_i"}
    proc = subprocess.run(["sh", "-c", command], cwd=repo, input=json.dumps(payload),
                          capture_output=True, text=True,
                          env={**os.environ, "GITWAL_NO_SERVER": "1"})  # server: its own tests
    assert proc.returncode == 0, proc.stderr
    assert '"call":"toolu_i"' in ok(repo, "log", "--json", "--run", "claude-s")


def test_install_mcp_registers_the_server_beside_the_users_own(repo: Path) -> None:
    mcp = repo / ".mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"db": {"command": "db-mcp", "args": ["-v"]}}}))
    out = json.loads(ok(repo, "install", "claude", "--mcp", "--json"))
    assert {"event": ".mcp.json gitwal server", "action": "added"} in out["changes"]
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers == {"db": {"command": "db-mcp", "args": ["-v"]},
                       "gitwal": {"command": "git-wal", "args": ["mcp"]}}
    again = json.loads(ok(repo, "install", "claude", "--mcp", "--json"))
    assert {"event": ".mcp.json gitwal server", "action": "unchanged"} in again["changes"]
    ok(repo, "uninstall", "claude", "--mcp")
    assert json.loads(mcp.read_text()) == {"mcpServers": {"db": {"command": "db-mcp",
                                                                 "args": ["-v"]}}}
    assert "hooks" not in settings(repo) or not settings(repo)["hooks"].get("PreToolUse")


def test_install_mcp_outside_the_project_scope_is_refused(repo: Path) -> None:
    proc = wal(repo, "install", "claude", "--scope", "user", "--mcp")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --mcp registers the server in the project's")
    assert "hint: use `--scope project`" in proc.stderr
    assert not (Path(os.environ["HOME"]) / ".claude" / "settings.json").exists()


def test_reinstall_over_an_older_single_group_install_updates_it(repo: Path) -> None:
    ok(repo, "install", "claude")
    data = settings(repo)
    ours = data["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    data["hooks"]["PostToolUse"] = [{"matcher": "Edit|Bash", "hooks": [
        {"type": "command", "command": ours, "timeout": 60}]}]
    (repo / ".claude" / "settings.json").write_text(json.dumps(data))
    out = json.loads(ok(repo, "install", "claude", "--json"))
    assert {"event": "PostToolUse", "action": "updated"} in out["changes"]
    assert [g["matcher"] for g in settings(repo)["hooks"]["PostToolUse"]] == [
        "Edit|MultiEdit|Write|NotebookEdit", "Bash|PowerShell"]


@pytest.mark.parametrize(("agent", "rel"), [("codex", ".codex/hooks.json"),
                                             ("gemini", ".gemini/settings.json")])
def test_codex_and_gemini_get_exactly_the_shipped_definitions(
        repo: Path, agent: str, rel: str) -> None:
    shipped = json.loads((ROOT / "hooks" / agent / "hooks.json").read_text())
    assert handlers(shipped) and {h["command"] for h in handlers(shipped)} == {
        hook_commands.COMMAND}
    # The adapter still builds the same entries in code: the two must not drift.
    adapter = importlib.import_module(f"gitwal.agents.{agent}")
    assert shipped["hooks"] == {e: [g] for e, g in adapter.groups(hook_commands.COMMAND).items()}

    out = json.loads(ok(repo, "install", agent, "--json"))
    assert [(c["event"], c["action"]) for c in out["changes"]] == [
        (e, "added") for e in shipped["hooks"]]
    written = json.loads((repo / rel).read_text())
    assert all(hook_commands.is_ours(h, agent) for h in handlers(written))
    for event, groups in shipped["hooks"].items():
        for g in groups:
            for h in g["hooks"]:
                h["command"] = hook_commands.hook_command(agent, blocking=event in adapter.BLOCKING)
    assert written == shipped


def handlers(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for groups in data["hooks"].values() for g in groups for h in g["hooks"]]


CODEX_CONFIG = """# my Codex settings
model = "gpt-5-codex"  # the model I use

[mcp_servers.db]
command = "db-mcp"   # keep me
args = ["-v"]

[projects."/src/x"]
trust_level = "trusted"
"""


@pytest.mark.parametrize("scope", ["project", "user"])
def test_install_codex_mcp_edits_config_toml_and_keeps_its_comments(
        repo: Path, scope: str) -> None:
    import tomllib

    base = repo if scope == "project" else Path(os.environ["HOME"])
    config = base / ".codex" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(CODEX_CONFIG)
    out = json.loads(ok(repo, "install", "codex", "--scope", scope, "--mcp", "--json"))
    assert {"event": "config.toml gitwal server", "action": "added"} in out["changes"]
    text = config.read_text()
    # Every byte of the user's file stays, comments included; gitwal's table is added.
    assert text.replace('[mcp_servers.gitwal]\ncommand = "git-wal"\nargs = ["mcp"]\n',
                        "") == CODEX_CONFIG
    assert tomllib.loads(text)["mcp_servers"] == {
        "db": {"command": "db-mcp", "args": ["-v"]},
        "gitwal": {"command": "git-wal", "args": ["mcp"]}}
    again = json.loads(ok(repo, "install", "codex", "--scope", scope, "--mcp", "--json"))
    assert {"event": "config.toml gitwal server", "action": "unchanged"} in again["changes"]
    assert config.read_text() == text
    out = json.loads(ok(repo, "uninstall", "codex", "--scope", scope, "--mcp", "--json"))
    assert {"event": "config.toml gitwal server", "action": "removed"} in out["changes"]
    assert config.read_text() == CODEX_CONFIG


def test_install_codex_mcp_creates_the_file_and_refuses_bad_toml(repo: Path) -> None:
    import tomllib

    ok(repo, "install", "codex", "--mcp")
    config = repo / ".codex" / "config.toml"
    assert tomllib.loads(config.read_text()) == {
        "mcp_servers": {"gitwal": {"command": "git-wal", "args": ["mcp"]}}}
    ok(repo, "uninstall", "codex", "--mcp")
    assert tomllib.loads(config.read_text()) == {}
    config.write_text("model = \n")
    proc = wal(repo, "install", "codex", "--mcp")
    assert proc.returncode == 1 and "is not valid TOML" in proc.stderr
    assert config.read_text() == "model = \n"


def test_install_gemini_mcp_registers_the_server_in_its_settings(repo: Path) -> None:
    path = repo / ".gemini" / "settings.json"
    path.parent.mkdir()
    user = {"mcpServers": {"db": {"command": "db-mcp"}}, "theme": "dark"}
    path.write_text(json.dumps(user))
    out = json.loads(ok(repo, "install", "gemini", "--mcp", "--json"))
    assert {"event": "settings.json gitwal server", "action": "added"} in out["changes"]
    data = json.loads(path.read_text())
    assert data["mcpServers"] == {"db": {"command": "db-mcp"},
                                  "gitwal": {"command": "git-wal", "args": ["mcp"]}}
    assert data["hooks"]["BeforeTool"]
    ok(repo, "uninstall", "gemini", "--mcp")
    assert json.loads(path.read_text()) == user


@pytest.mark.parametrize("unit", ["    ", "\t", "  "])
def test_install_keeps_the_files_own_layout_and_uninstall_restores_it(repo: Path,
                                                                      unit: str) -> None:
    # A settings file a team keeps in its own style (4 spaces, tabs, key order):
    # install rewrites only "hooks", in that style; uninstall gives the bytes back.
    (repo / ".claude").mkdir()
    path = repo / ".claude" / "settings.json"
    own = {"permissions": USER_SETTINGS["permissions"], "model": "opus"}
    original = json.dumps(own, indent=unit) + "\n"
    path.write_text(original)
    ok(repo, "install", "claude")
    text = path.read_text()
    assert text.startswith(original[:original.rindex("\n}")])  # every own byte, in place
    assert f'\n{unit}"hooks": {{\n{unit}{unit}"PreToolUse": [\n' in text
    assert "\n" + unit * 3 + "{\n" in text  # nested levels in the same unit
    assert settings(repo)["model"] == "opus" and commands(settings(repo), "PreToolUse")
    ok(repo, "uninstall", "claude")
    assert path.read_text() == original


def _claude_on_path(tmp_path: Path, says: str) -> dict[str, str]:
    """A PATH whose `claude --version` says ``says`` (what Claude Code prints:
    ``2.1.328 (Claude Code)``); the real binary's answer is read in
    tests/e2e/test_claude_on_failure.py."""
    bin_dir = tmp_path / f"bin-{says.split()[0]}"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(f"#!/bin/sh\necho '{says}'\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _on_failure(data: dict[str, Any]) -> dict[str, set[object]]:
    return {event: {h.get("onFailure") for g in groups for h in g["hooks"]}
            for event, groups in data["hooks"].items()}


def test_on_failure_block_is_written_where_claude_code_takes_it(repo: Path,
                                                                tmp_path: Path) -> None:
    name = f"agent claude (project: {repo / '.claude' / 'settings.json'})"
    check = f"{name}: a failing hook refuses the call"
    new = _claude_on_path(tmp_path, "2.1.328 (Claude Code)")
    proc = wal(repo, "install", "claude", env=new)
    assert proc.returncode == 0 and "onFailure" not in proc.stderr, proc.stderr
    found = _on_failure(settings(repo))
    assert found["PreToolUse"] == {"block"} and found["PreCompact"] == {"block"}
    assert all(v == {None} for e, v in found.items() if e not in ("PreToolUse", "PreCompact"))
    doc = json.loads(wal(repo, "doctor", "--json", env=new).stdout)
    assert {c["check"]: c for c in doc["checks"]}[check]["ok"]

    # An older Claude Code is not given the key; install says what it costs.
    old = _claude_on_path(tmp_path, "2.1.200 (Claude Code)")
    proc = wal(repo, "install", "claude", env=old)
    assert proc.returncode == 0 and "2.1.200" in proc.stderr and "2.1.295" in proc.stderr
    assert _on_failure(settings(repo))["PreToolUse"] == {None}
    doc = json.loads(wal(repo, "doctor", "--json", env=old).stdout)
    finding = {c["check"]: c for c in doc["checks"]}[check]
    assert finding["ok"] and finding["detail"].startswith("no (Claude Code here: 2.1.200")
    # Claude Code upgraded, the hooks not reinstalled: doctor names the fix.
    doc = json.loads(wal(repo, "doctor", "--json", env=new).stdout)
    finding = {c["check"]: c for c in doc["checks"]}[check]
    assert not finding["ok"] and finding["fix"] == "git wal install claude --scope project"
