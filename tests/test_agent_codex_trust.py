"""Codex's hook trust: `git wal install codex --trust` writes the entries Codex's
/hooks writes, keeps the rest of config.toml, and `git wal doctor` tells a
missing trust from a stale one. (That Codex itself accepts the hashes is shown
by tests/e2e/test_codex.py, whose sessions run without any trust bypass.)"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from gitwal.agents import codex_trust

from .conftest import ok, wal
from .test_doctor import checks


def config(home: Path) -> dict[str, Any]:
    return tomllib.loads((home / ".codex" / "config.toml").read_text())


def test_the_hash_is_over_the_normalized_definition() -> None:
    base = codex_trust.hook_hash("PreToolUse", "Bash", {"type": "command", "command": "x"})
    # Codex fills in its defaults before hashing: an explicit 600 s, async false.
    assert base == codex_trust.hook_hash("PreToolUse", "Bash", {
        "type": "command", "command": "x", "timeout": 600, "async": False})
    for other in (codex_trust.hook_hash("PostToolUse", "Bash", {"command": "x"}),
                  codex_trust.hook_hash("PreToolUse", None, {"command": "x"}),
                  codex_trust.hook_hash("PreToolUse", "Bash", {"command": "y"}),
                  codex_trust.hook_hash("PreToolUse", "Bash", {"command": "x", "timeout": 60})):
        assert other != base
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    # A timeout of 0 is raised to Codex's minimum of 1 second, not its default.
    assert codex_trust.hook_hash("Stop", None, {"command": "x", "timeout": 0}) == \
        codex_trust.hook_hash("Stop", None, {"command": "x", "timeout": 1})
    assert codex_trust.event_label("SessionStart") == "session_start"


def test_install_trust_writes_one_entry_per_gitwal_hook_and_keeps_the_rest(
        repo: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir(exist_ok=True)
    mine = '# my settings\nmodel = "o3"\n\n[hooks.state."/elsewhere/hooks.json:stop:0:0"]\n' \
           'trusted_hash = "sha256:keep"\n'
    (home / ".codex" / "config.toml").write_text(mine)
    hooks = repo / ".codex" / "hooks.json"
    hooks.parent.mkdir()
    # A hook of the user's own comes first: gitwal's PreToolUse group is the second.
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-check"}]}]}}))
    out = ok(repo, "install", "codex", "--trust")
    assert "trusted 5 of the 5 gitwal hook(s)" in out
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(mine)  # comments and the other entry kept, byte for byte
    state = config(home)["hooks"]["state"]
    source = os.path.realpath(hooks)
    keys = {f"{source}:pre_tool_use:1:0", f"{source}:post_tool_use:0:0",
            f"{source}:session_start:0:0", f"{source}:pre_compact:0:0", f"{source}:stop:0:0"}
    assert set(state) == keys | {"/elsewhere/hooks.json:stop:0:0"}
    data = json.loads(hooks.read_text())
    handler = data["hooks"]["PreToolUse"][1]["hooks"][0]
    assert state[f"{source}:pre_tool_use:1:0"]["trusted_hash"] == codex_trust.hook_hash(
        "PreToolUse", data["hooks"]["PreToolUse"][1]["matcher"], handler)
    assert f"{source}:pre_tool_use:0:0" not in state  # the user's own hook: their call
    # Reinstalling changes nothing: the command is the same on every install.
    assert "were already trusted" in ok(repo, "install", "codex", "--trust")
    report = json.loads(ok(repo, "install", "codex", "--trust", "--json"))
    assert {"event": "config.toml hook trust", "action": "unchanged"} in report["changes"]
    assert (home / ".codex" / "config.toml").read_text() == text


def test_doctor_tells_missing_trust_from_stale_trust(repo: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex" / "config.toml").write_text(
        f'[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n')
    ok(repo, "hooks", "install")
    ok(repo, "install", "codex")
    name = f"agent codex (project: {repo / '.codex' / 'hooks.json'}): hook trust"
    found = checks(repo, code=1)[name]
    assert not found["ok"] and found["detail"].startswith("not trusted by codex")
    assert "--trust" in found["fix"]
    ok(repo, "install", "codex", "--trust")
    assert checks(repo, code=0)[name]["ok"]
    hooks = repo / ".codex" / "hooks.json"
    data = json.loads(hooks.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 30  # the definition changed
    hooks.write_text(json.dumps(data))
    found = checks(repo, code=1)[name]
    assert not found["ok"] and "definition changed" in found["detail"]
    assert found["detail"].endswith(": Stop")


def test_trust_is_for_codex_only(repo: Path) -> None:
    proc = wal(repo, "install", "claude", "--trust")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --trust is for codex")
    assert "hint: " in proc.stderr
    assert not (repo / ".claude" / "settings.json").exists()


def test_user_scope_follows_codex_home(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    proc = wal(repo, "install", "codex", "--scope", "user", "--trust",
               env={"CODEX_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    data = json.loads((home / "hooks.json").read_text())
    state = tomllib.loads((home / "config.toml").read_text())["hooks"]["state"]
    entries = codex_trust.hook_entries(home / "hooks.json", data)
    assert {e.key: e.current_hash for e in entries} == {
        k: v["trusted_hash"] for k, v in state.items()}
    assert not (Path(os.environ["HOME"]) / ".codex").exists()
