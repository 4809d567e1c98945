"""The hook commands `git wal install` writes are portable and fail closed: they
name no path of this machine, run the gitwal found on PATH (a second virtual
environment, as on a teammate's machine), and refuse a call when there is none."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import hook_commands, launch
from gitwal.agents.jsonc import strip_comments

from .conftest import ok, wal
from .test_agent_payloads import claude, claude_run, claude_tool, wal_log
from .test_packaging import build_wheel

ROOT = Path(__file__).resolve().parent.parent
FILES = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json",
         "gemini": ".gemini/settings.json"}
# An absolute path: a slash that starts a word of the command (after a blank,
# a quote, `=`, a redirection or a separator).
ABSOLUTE = re.compile(r"(?:^|[\s'\"=<>|;(&])/")


def strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in strings(v)]
    return []


def handlers(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for groups in data["hooks"].values() for g in groups for h in g["hooks"]]


@pytest.mark.parametrize("in_process", [False, True])
@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_project_settings_name_no_path_of_this_machine(repo: Path, agent: str,
                                                       in_process: bool) -> None:
    ok(repo, "install", agent, *(["--in-process"] if in_process else []))
    text = (repo / FILES[agent]).read_text()
    for machine in (sys.executable, str(ROOT), sys.prefix, str(Path.home()), str(repo)):
        assert machine not in text
    assert "site-packages" not in text and "python" not in text.replace("pipx", "")
    commands = [h["command"] for h in handlers(json.loads(text))]
    assert commands and all(c.startswith("sh -c '") for c in commands)
    for s in strings(json.loads(text)):
        assert not ABSOLUTE.search(s), s
    # Inside the quotes: nothing fish or zsh would read differently from sh.
    assert all(c[len("sh -c '"):-1].count("'") == 0 and "\\" not in c for c in commands)


def test_an_old_absolute_install_is_replaced_and_uninstalled(repo: Path) -> None:
    old = (f"{sys.executable} -S -E /old/venv/lib/python3.11/site-packages/gitwal/agents/"
           "hook_client.py claude")
    (repo / ".claude").mkdir()
    settings = repo / ".claude" / "settings.json"
    settings.write_text(json.dumps({"model": "opus",
                                    "hooks": hook_commands.groups("claude", old)}))
    out = json.loads(ok(repo, "install", "claude", "--json"))
    assert {c["action"] for c in out["changes"]} == {"updated"}
    assert old not in settings.read_text()
    ok(repo, "uninstall", "claude")
    assert json.loads(settings.read_text()) == {"model": "opus"}


def test_another_agents_or_the_users_command_is_not_taken_for_ours() -> None:
    codex = {"type": "command", "command": hook_commands.hook_command("codex")}
    assert hook_commands.is_ours(codex, "codex") and not hook_commands.is_ours(codex, "claude")
    mine = {"type": "command", "command": "sh -c 'git-wal-hook claude | tee log'"}
    assert not hook_commands.is_ours(mine, "claude")


GEMINI_WITH_COMMENTS = """{
  // my model
  "model": {"name": "gemini-2.5-pro"}, /* a block
  comment */
  "docs": "https://example.com/a//b /* not a comment */"
}
"""


def test_gemini_settings_keep_their_comments_through_install_and_uninstall(repo: Path) -> None:
    path = repo / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(GEMINI_WITH_COMMENTS)
    proc = wal(repo, "install", "gemini", "--mcp")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    text = path.read_text()
    # Only gitwal's members were added: every byte of the user's file is still there.
    head = GEMINI_WITH_COMMENTS.rstrip()[:-1].rstrip()
    assert text.startswith(head + ",\n") and text.endswith("}\n")
    data = json.loads(strip_comments(text)[0])
    assert data["model"] == {"name": "gemini-2.5-pro"}
    assert data["docs"] == "https://example.com/a//b /* not a comment */"
    assert all(hook_commands.is_ours(h, "gemini") for h in handlers(data))
    assert data["mcpServers"] == {"gitwal": {"command": "git-wal", "args": ["mcp"]}}
    again = wal(repo, "install", "gemini", "--mcp")
    assert again.returncode == 0 and path.read_text() == text
    ok(repo, "uninstall", "gemini", "--mcp")
    assert path.read_text() == GEMINI_WITH_COMMENTS
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_gemini_comments_inside_what_changes_are_kept_in_a_backup(repo: Path) -> None:
    path = repo / ".gemini" / "settings.json"
    path.parent.mkdir()
    original = ('{"hooks": {"AfterTool": [ // my formatter\n'
                '  {"hooks": [{"type": "command", "command": "fmt"}]}]}}\n')
    path.write_text(original)
    proc = wal(repo, "install", "gemini")
    assert proc.returncode == 0, proc.stderr
    backup = path.with_name("settings.json.gitwal-backup")
    assert backup.read_text() == original
    assert f"the original is {backup}" in proc.stderr
    data = json.loads(path.read_text())
    assert data["hooks"]["AfterTool"][0] == {"hooks": [{"type": "command", "command": "fmt"}]}
    # A file that does not parse even without its comments is refused, not rewritten.
    path.write_text('{"a": 1,} // trailing comma\n')
    bad = wal(repo, "install", "gemini")
    assert bad.returncode == 1 and "not valid JSON with comments" in bad.stderr
    assert path.read_text() == '{"a": 1,} // trailing comma\n'


def test_install_names_the_trust_steps_and_a_missing_entry_point(repo: Path) -> None:
    codex = ok(repo, "install", "codex")
    assert "open /hooks and trust the gitwal hooks" in codex
    assert "only in a trusted project" in codex and "`[features] hooks = false`" in codex
    assert "codex_hooks" in codex and "old name" in codex
    gemini = ok(repo, "install", "gemini")
    assert "does not trust" in gemini and "Trust folder" in gemini and "--skip-trust" in gemini
    assert "hooksConfig.enabled" in gemini
    proc = wal(repo, "install", "claude", env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "warning: git-wal-hook is not on PATH here" in proc.stderr


def test_the_launch_cache_keeps_one_usable_record_per_entry_point(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "gitwal" / "hook-launch"
    client = tmp_path / "hook_client.py"
    client.write_text("")
    py = sys.executable
    assert launch.remember("/a/bin/git-wal-hook", py, str(client), cache)
    assert not launch.remember("/a/bin/git-wal-hook", py, str(client), cache)  # unchanged
    assert launch.remember("/b/bin/git-wal-hook", py, str(client), cache)
    assert launch.remember("/a/bin/git-wal-hook", py, str(client) + "x", cache)
    assert launch.parse(cache.read_text()) == [("/b/bin/git-wal-hook", py, str(client)),
                                               ("/a/bin/git-wal-hook", py, str(client) + "x")]
    # A stale record (its client is gone) is dropped at the next write.
    assert launch.remember("/c/bin/git-wal-hook", py, str(client), cache)
    assert [r[0] for r in launch.parse(cache.read_text())] == ["/b/bin/git-wal-hook",
                                                               "/c/bin/git-wal-hook"]
    assert (cache.stat().st_mode & 0o777, cache.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert not launch.remember("relative/git-wal-hook", py, str(client), cache)


# -- a second environment -----------------------------------------------------------


def second_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A virtual environment with gitwal installed from a wheel of this checkout
    (its dependencies come from this one's site-packages: a .pth names it), and
    its site-packages."""
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        assert "gitwal/agents/launch.py" in z.namelist()
    venv = tmp_path / "v2"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "-q", "--no-deps", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib'))"], capture_output=True, text=True, check=True)
    packages = Path(site.stdout.strip())
    (packages / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    where = subprocess.run([str(python), "-c", "import gitwal; print(gitwal.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()) == packages / "gitwal" / "__init__.py"
    return venv, packages


def run(command: str, repo: Path, payload: dict[str, Any],
        path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(["sh", "-c", command], cwd=repo, input=json.dumps(payload),
                          capture_output=True, text=True, env=env)


def calls(repo: Path) -> list[str]:
    return [r["args"]["agent"]["call"] for r in wal_log(repo, claude_run())
            if r["type"] == "intent"]


@pytest.mark.slow
def test_a_project_install_works_in_another_environment_and_fails_closed_without_one(
        repo: Path, tmp_path: Path) -> None:
    ok(repo, "install", "claude")  # by this environment: the file a team commits
    data = json.loads((repo / ".claude" / "settings.json").read_text())
    pre = data["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    stop = data["hooks"]["Stop"][0]["hooks"][0]["command"]
    venv, packages = second_venv(tmp_path)
    there = f"{venv / 'bin'}:/usr/bin:/bin"
    hook = venv / "bin" / "git-wal-hook"

    def write(call: str, name: str) -> dict[str, Any]:
        return claude_tool(repo, "PreToolUse", "Write",
                           {"file_path": str(repo / name), "content": f"{name}\n"}, call)

    # The first call runs git-wal-hook, which records its install in the launch cache.
    r = run(pre, repo, write("toolu_1", "one.txt"), there)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert launch.parse(launch.cache_path().read_text()) == [
        (str(hook), str(venv / "bin" / "python"),
         str(packages / "gitwal" / "agents" / "hook_client.py"))]
    assert calls(repo) == ["toolu_1"]

    # Later calls run that client straight from the cache: git-wal-hook is not run.
    original = hook.read_bytes()
    hook.write_text("#!/bin/sh\nexit 3\n")
    r = run(pre, repo, write("toolu_2", "two.txt"), there)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert calls(repo) == ["toolu_1", "toolu_2"]
    hook.write_bytes(original)

    # No gitwal on PATH: the call is refused (exit 2), and the message says what
    # to do; a hook that cannot refuse anything reports it without blocking.
    r = run(pre, repo, write("toolu_3", "three.txt"), "/usr/bin:/bin")
    assert r.returncode == 2
    assert "git-wal-hook is not on PATH, so this call cannot be logged and is refused" in r.stderr
    assert "pipx install gitwal" in r.stderr and "git wal uninstall claude" in r.stderr
    r = run(stop, repo, claude(repo, "Stop", stop_hook_active=False), "/usr/bin:/bin")
    assert r.returncode == 1 and "so this hook call was not logged" in r.stderr
    assert calls(repo) == ["toolu_1", "toolu_2"]

    # The environment cannot import gitwal any more (a broken upgrade, a
    # half-removed package): the cached client dies with a traceback (exit 1),
    # which an agent would take as "go on"; the call is refused instead.
    client = packages / "gitwal" / "agents" / "client.py"
    saved = client.read_bytes()
    client.write_text("raise ImportError('broken install')\n")
    r = run(pre, repo, write("toolu_5", "five.txt"), there)
    assert r.returncode == 2, r.stderr
    assert "git-wal-hook failed to run (exit 1), so this call cannot be logged" in r.stderr
    r = run(stop, repo, claude(repo, "Stop", stop_hook_active=False), there)
    assert r.returncode == 1  # a Stop hook is never turned into a block
    # Without the cached client, git-wal-hook itself cannot import gitwal: refused too.
    (packages / "gitwal").rename(packages / "gitwal-moved")
    r = run(pre, repo, write("toolu_6", "six.txt"), there)
    assert r.returncode == 2 and "No module named 'gitwal'" in r.stderr, r.stderr
    (packages / "gitwal-moved").rename(packages / "gitwal")
    client.write_bytes(saved)
    assert calls(repo) == ["toolu_1", "toolu_2"]

    # The environment's python is gone (recreated elsewhere, Python upgraded):
    # git-wal-hook cannot start (127), and the call is refused, not let through.
    for p in (venv / "bin").glob("python*"):
        p.unlink()
    r = run(pre, repo, write("toolu_4", "four.txt"), there)
    assert r.returncode == 2, r.stderr
    assert "git-wal-hook failed to run (exit 127)" in r.stderr
    r = run(stop, repo, claude(repo, "Stop", stop_hook_active=False), there)
    assert r.returncode == 1 and "could not be started (exit 127)" in r.stderr
    assert calls(repo) == ["toolu_1", "toolu_2"]


@pytest.mark.parametrize("shell", ["sh", "bash", "zsh"])
def test_every_shell_an_agent_uses_reads_the_command_alike(repo: Path, shell: str) -> None:
    # Claude Code and Gemini CLI run `bash -c`, Codex `$SHELL -lc` (zsh, fish, ...).
    found = shutil.which(shell)
    if found is None:
        pytest.skip(f"{shell} is not installed")
    bare = repo.parent / "bare"  # the agent's PATH holds the shells and no gitwal
    bare.mkdir()
    for name in ("sh", shell):
        if not (bare / name).exists():
            (bare / name).symlink_to(shutil.which(name) or name)
    for blocking, code in ((True, 2), (False, 1)):
        command = hook_commands.hook_command("codex", blocking=blocking)
        r = subprocess.run([found, "-c", command], cwd=repo, input="{}", text=True,
                           capture_output=True, env={**os.environ, "PATH": str(bare)})
        assert r.returncode == code, r.stderr
        assert r.stderr.startswith("gitwal: git-wal-hook is not on PATH, so this")
        assert r.stderr.rstrip().endswith("(git wal uninstall codex).")


def test_jsonc_edit_rewrites_only_what_changes_and_keeps_every_comment() -> None:
    from gitwal.agents.jsonc import edit

    text = '{\n  "a": 1, // one\n  /* two */ "b": [2],\n  "c": {"d": 3} // three\n}\n'
    old = {"a": 1, "b": [2], "c": {"d": 3}}
    for new in ({"a": 1, "b": [2], "c": {"d": 3}, "e": 5}, {"a": 1, "c": {"d": 3}},
                {"a": 1, "b": [2]}, {"b": [2], "c": {"d": 3}}, {"a": 9, "b": [2], "c": {"d": 3}}):
        out = edit(text, old, new)
        assert out is not None, new
        assert json.loads(strip_comments(out)[0]) == new
        for comment in ("// one", "/* two */", "// three"):
            assert comment in out, (new, out)
        if "e" in new:  # what install adds, uninstall takes out to the byte
            assert edit(out, new, old) == text
    # A comment inside a member that changes cannot be kept in place: None.
    assert edit('{"a": [1, // x\n 2]}', {"a": [1, 2]}, {"a": [3]}) is None
    # A key twice: which one the agent reads is not for gitwal to guess.
    assert edit('{"a": 1, "a": 2}', {"a": 2}, {"a": 2, "b": 1}) is None
    assert edit("[1] // not an object", {}, {"a": 1}) is None
