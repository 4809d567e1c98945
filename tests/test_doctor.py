"""`git wal doctor` against working and broken installs, in real repositories."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .conftest import git, ok, wal


def checks(repo: Path, env: dict[str, str] | None = None, code: int | None = None
           ) -> dict[str, dict[str, Any]]:
    proc = wal(repo, "doctor", "--json", env=env)
    doc = json.loads(proc.stdout)
    if code is not None:
        assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert doc["ok"] == (proc.returncode == 0)
    return {c["check"]: c for c in doc["checks"]}


def test_a_fresh_repository_needs_its_git_hooks_and_then_passes(repo: Path) -> None:
    found = checks(repo, code=1)
    assert not found["git hook pre-commit"]["ok"]
    assert found["git hook pre-commit"]["fix"] == "git wal hooks install"
    ok(repo, "hooks", "install")
    run = ok(repo, "begin").strip()
    found = checks(repo, code=0)
    assert found[f"log {run}"]["ok"] and "readable" in found[f"log {run}"]["detail"]
    text = wal(repo, "doctor")
    assert text.returncode == 0 and "ok   git hook reference-transaction: installed" in text.stdout


def test_agent_hooks_are_probed_where_the_agent_runs_them(repo: Path) -> None:
    ok(repo, "hooks", "install")
    ok(repo, "install", "claude")
    name = f"agent claude (project: {repo / '.claude' / 'settings.json'})"
    found = checks(repo, code=0)
    assert found[f"{name}: commands"]["ok"]
    assert found[f"{name}: probe"]["detail"] == "the PreToolUse hook answered (exit 0)"
    assert ok(repo, "runs", "--json").strip() == "[]"  # the probe logged nothing
    # Where the agent runs without gitwal on its PATH, its hook fails closed,
    # and doctor says so (the same settings, the same command).
    bare = {"PATH": "/usr/bin:/bin"}
    proc = wal(repo, "doctor", "--json", env=bare)
    assert proc.returncode == 1
    probe = {c["check"]: c for c in json.loads(proc.stdout)["checks"]}[f"{name}: probe"]
    assert not probe["ok"] and "exited 2" in probe["detail"]
    assert "git-wal-hook is not on PATH" in probe["detail"]
    assert "pipx install gitwal" in probe["fix"]


def test_a_hook_command_bound_to_another_machine_is_refused(repo: Path) -> None:
    ok(repo, "hooks", "install")
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    # What an earlier install wrote: the installer's virtualenv, which is gone.
    old = "/nonexistent/venv/bin/python3 -S -E /nonexistent/gitwal/agents/hook_client.py claude"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": old}]}]}}))
    name = f"agent claude (project: {settings})"
    found = checks(repo, code=1)
    assert not found[f"{name}: commands"]["ok"]
    assert found[f"{name}: commands"]["fix"] == "git wal install claude --scope project"
    # Not run: only a command exactly as this gitwal writes it is ever run.
    assert not found[f"{name}: probe"]["ok"]
    assert found[f"{name}: probe"]["detail"].startswith("not run: the PreToolUse command")
    ok(repo, "install", "claude")  # rewrites the entry: portable now
    found = checks(repo, code=0)
    assert found[f"{name}: commands"]["ok"] and found[f"{name}: probe"]["ok"]


def test_a_foreign_command_that_looks_like_gitwals_is_not_run(repo: Path, tmp_path: Path
                                                            ) -> None:
    marker = tmp_path / "ran"
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    # Shaped to pass for gitwal's entry, as a cloned settings file could be.
    forged = (f"sh -c 'touch {marker}; git-wal-hook claude (git wal uninstall claude).'")
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": forged}]}]}}))
    found = checks(repo, code=1)
    probe = found[f"agent claude (project: {settings}): probe"]
    assert not probe["ok"] and probe["detail"].startswith("not run")
    assert not marker.exists()


def test_agent_trust_is_checked_where_the_agent_keeps_it(repo: Path) -> None:
    ok(repo, "hooks", "install")
    ok(repo, "install", "codex")
    ok(repo, "install", "gemini")
    home = Path(os.environ["HOME"])
    top = str(repo.resolve())
    codex = f"agent codex (project: {repo / '.codex' / 'hooks.json'})"
    gemini = f"agent gemini (project: {repo / '.gemini' / 'settings.json'})"
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"folderTrust": {"enabled": True}}}))
    found = checks(repo, code=1)
    assert not found[f"{codex}: project trust"]["ok"]
    assert not found[f"{gemini}: folder trust"]["ok"]
    assert found[f"{codex}: probe"]["ok"] and found[f"{gemini}: probe"]["ok"]
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex" / "config.toml").write_text(
        f'# mine\n[projects."{top}"]\ntrust_level = "trusted"\n')
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({top: "TRUST_FOLDER"}))
    assert not checks(repo, code=1)[f"{codex}: hook trust"]["ok"]
    ok(repo, "install", "codex", "--trust")
    found = checks(repo, code=0)
    assert found[f"{codex}: project trust"]["ok"] and found[f"{gemini}: folder trust"]["ok"]


def test_a_damaged_log_and_a_missing_signing_key_are_named(repo: Path, tmp_path: Path) -> None:
    run = ok(repo, "begin", "--run", "r1").strip()
    ok(repo, "apply", "ensure-line", "README", "x")
    # The log's ref moved onto the branch's commit: not a gitwal log (done
    # before the hooks that would refuse it are installed).
    git(repo, "update-ref", "--no-deref", f"refs/wal/{run}", "HEAD")
    ok(repo, "hooks", "install")
    git(repo, "config", "wal.signingKey", str(tmp_path / "no-such-key"))
    found = checks(repo, code=1)
    assert not found[f"log {run}"]["ok"] and found[f"log {run}"]["fix"]
    assert not found["signing key"]["ok"] and "no-such-key" in found["signing key"]["detail"]
    text = wal(repo, "doctor")
    assert "FAIL signing key:" in text.stdout and "     fix: " in text.stdout
