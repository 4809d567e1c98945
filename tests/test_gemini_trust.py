"""Gemini CLI's folder trust and hook gates, as `git wal doctor` reads them
(gitwal/agents/gemini_trust.py; the rules of Gemini CLI 0.61.0)."""

from __future__ import annotations

import json
from pathlib import Path

from gitwal.agents.gemini_trust import checks, hooks_enabled, trust

OURS = {"BeforeTool": "sh -c 'gitwal'", "AfterTool": "sh -c 'gitwal'"}


def setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    home, top = tmp_path / "home", tmp_path / "work" / "project"
    (home / ".gemini").mkdir(parents=True)
    top.mkdir(parents=True)
    system = tmp_path / "etc" / "settings.json"  # not the machine's /etc/gemini-cli
    return home, top, {"HOME": str(home), "GEMINI_CLI_HOME": str(home),
                       "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system)}


def folders(home: Path, rules: dict[str, str]) -> None:
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(rules))


def test_no_rule_is_untrusted_and_says_skip_trust_does_not_help(tmp_path: Path) -> None:
    _home, top, env = setup(tmp_path)
    c = trust(top, env)
    assert not c.ok and "refuses to run" in c.detail and "--skip-trust" in c.fix


def test_folder_parent_and_longest_rule(tmp_path: Path) -> None:
    home, top, env = setup(tmp_path)
    folders(home, {str(top): "TRUST_FOLDER"})
    assert trust(top, env).ok
    folders(home, {str(top / "anything"): "TRUST_PARENT"})  # its parent: top
    assert trust(top, env).ok
    folders(home, {str(top.parent): "TRUST_FOLDER", str(top): "DO_NOT_TRUST"})
    c = trust(top, env)
    assert not c.ok and "DO_NOT_TRUST" in c.detail
    folders(home, {str(top.parent): "DO_NOT_TRUST", str(top): "TRUST_FOLDER"})
    assert trust(top, env).ok
    folders(home, {str(top / "sub"): "TRUST_FOLDER"})  # a child is not the folder
    assert not trust(top, env).ok


def test_comments_and_a_broken_file(tmp_path: Path) -> None:
    home, top, env = setup(tmp_path)
    path = home / ".gemini" / "trustedFolders.json"
    path.write_text(f'// mine\n{{"{top}": "TRUST_FOLDER"}}\n')
    assert trust(top, env).ok
    path.write_text("{")
    c = trust(top, env)
    assert not c.ok and "refuses to start" in c.detail


def test_environment_and_settings(tmp_path: Path) -> None:
    home, top, env = setup(tmp_path)
    assert trust(top, {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}).ok
    folders(home, {str(top): "TRUST_FOLDER"})
    assert not trust(top, {**env, "GEMINI_CLI_TRUST_WORKSPACE": "false"}).ok
    other = tmp_path / "elsewhere.json"
    other.write_text("{}")
    assert not trust(top, {**env, "GEMINI_CLI_TRUSTED_FOLDERS_PATH": str(other)}).ok
    folders(home, {})
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    assert trust(top, env).ok


def test_hooks_gates(tmp_path: Path) -> None:
    home, top, env = setup(tmp_path)
    assert hooks_enabled(top, env, OURS).ok
    user = home / ".gemini" / "settings.json"
    user.write_text(json.dumps({"hooksConfig": {"enabled": False}}))
    c = hooks_enabled(top, env, OURS)
    assert not c.ok and str(user) in c.detail
    (top / ".gemini").mkdir()
    (top / ".gemini" / "settings.json").write_text(json.dumps({"hooksConfig": {"enabled": True}}))
    assert hooks_enabled(top, env, OURS).ok  # the project's settings win
    user.write_text(json.dumps({"hooksConfig": {"disabled": ["gitwal-AfterTool"]}}))
    c = hooks_enabled(top, env, OURS)
    assert not c.ok and "AfterTool" in c.detail and "BeforeTool" not in c.detail


def test_user_scope_has_no_folder_check(tmp_path: Path) -> None:
    _home, top, env = setup(tmp_path)
    assert [c.name for c in checks(top, "user", OURS, env)] == ["hooks enabled"]
    assert [c.name for c in checks(top, "project", OURS, env)] == ["folder trust",
                                                                    "hooks enabled"]


def test_system_settings_weigh_most_and_system_defaults_least(tmp_path: Path) -> None:
    home, top, env = setup(tmp_path)
    etc = tmp_path / "etc"
    etc.mkdir()
    (top / ".gemini").mkdir()
    (top / ".gemini" / "settings.json").write_text(json.dumps({"hooksConfig": {"enabled": True}}))
    (etc / "settings.json").write_text(json.dumps({"hooksConfig": {"enabled": False}}))
    c = hooks_enabled(top, env, OURS)
    assert not c.ok and str(etc / "settings.json") in c.detail
    (etc / "settings.json").write_text("{}")
    (etc / "system-defaults.json").write_text(
        json.dumps({"security": {"folderTrust": {"enabled": False}},
                    "hooksConfig": {"disabled": ["gitwal-BeforeTool"]}}))
    assert trust(top, env).ok  # folder trust off by default, here
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"folderTrust": {"enabled": True}}}))
    assert not trust(top, env).ok  # the user's settings win over the defaults
    c = hooks_enabled(top, env, OURS)
    assert not c.ok and "BeforeTool" in c.detail  # lists are joined across files
