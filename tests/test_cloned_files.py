"""Files that come with a clone are data (gitwal/cloned/): a repository that
commits its agents' settings as symlinks out of the tree, as /dev/zero, nested
100,000 levels deep or not as UTF-8 makes `install`, `uninstall`, `doctor`,
`mcp-config` and `hooks` neither read nor write outside the tree, nor hang, nor
die with a traceback. Each repository here is a real `git clone` of one that
commits the hostile files."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from gitwal.cloned import MAX_BYTES, File, UnsafeFile, load_json
from gitwal.cloned.parse import depth

from .conftest import GIT_WAL, git, init_repo, ok

DEEP = 100_000
SECRET = '{"apiKey": "sk-live-0123456789abcdef"}\n'
AGENT_DIRS = {"claude": ".claude", "codex": ".codex", "gemini": ".gemini"}
AGENT_FILES = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json",
               "gemini": ".gemini/settings.json"}


def hostile_clone(tmp_path: Path, links: dict[str, str] | None = None,
                  files: dict[str, bytes] | None = None) -> Path:
    """A `git clone` of a repository that commits ``links`` (path -> symlink
    target) and ``files`` (path -> bytes)."""
    origin = init_repo(tmp_path / "origin")
    for rel, target in (links or {}).items():
        (origin / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, origin / rel)
    for rel, data in (files or {}).items():
        (origin / rel).parent.mkdir(parents=True, exist_ok=True)
        (origin / rel).write_bytes(data)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "settings")
    git(tmp_path, "clone", "-q", str(origin), "clone")
    clone = tmp_path / "clone"
    for rel, target in (links or {}).items():
        assert os.readlink(clone / rel) == target  # the clone holds the link itself
    return clone


def _limits() -> None:
    # A reader without bound would take all of the machine's memory: 2 GiB
    # turns that into a failure of this test, not of the machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `git-wal`, bounded in memory; a hang fails the test instead
    of the suite (the timeout is a guard, not a measurement)."""
    return subprocess.run([GIT_WAL, *args], cwd=repo, capture_output=True, text=True,
                          preexec_fn=_limits, timeout=600)


def refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and "\nhint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr


def listing(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file()}


# -- finding: symlinks a clone commits ------------------------------------------------


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_committed_directory_link_out_of_the_tree_is_never_written_through(
        tmp_path: Path, agent: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / Path(AGENT_FILES[agent]).name).write_text('{"theirs": true}\n')
    (outside / "config.toml").write_text('model = "theirs"\n')
    before = listing(outside)
    clone = hostile_clone(tmp_path, links={AGENT_DIRS[agent]: "../outside"})
    args = ["install", agent] + (["--mcp"] if agent == "codex" else [])
    refused(run(clone, *args), "symbolic link", AGENT_DIRS[agent])
    refused(run(clone, "uninstall", agent), "symbolic link")
    assert listing(outside) == before  # nothing outside the tree written or added
    assert os.readlink(clone / AGENT_DIRS[agent]) == "../outside"
    doctor = run(clone, "doctor", "--json")
    found = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    name = f"agent {agent} (project: {clone / AGENT_FILES[agent]})"
    assert not found[name]["ok"] and "symbolic link" in found[name]["detail"], found
    assert listing(outside) == before


def test_a_committed_settings_link_to_a_key_is_not_copied_into_the_tree(
        tmp_path: Path) -> None:
    key = tmp_path / "secret" / "credentials.json"
    key.parent.mkdir()
    key.write_text(SECRET)
    clone = hostile_clone(tmp_path, links={".claude/settings.json": str(key),
                                           ".mcp.json": str(key)})
    refused(run(clone, "install", "claude"), "symbolic link", "settings.json")
    refused(run(clone, "install", "claude", "--mcp"), "symbolic link")
    refused(run(clone, "mcp-config", "--merge"), "symbolic link", ".mcp.json")
    assert key.read_text() == SECRET
    assert os.readlink(clone / ".claude" / "settings.json") == str(key)
    assert os.readlink(clone / ".mcp.json") == str(key)
    # The key is nowhere in the tree gitwal may have written.
    for p in clone.rglob("*"):
        if p.is_file() and not p.is_symlink() and ".git" not in p.parts:
            assert b"sk-live" not in p.read_bytes(), p


def test_a_committed_hook_manager_config_link_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "lefthook.yml").write_text(
        "pre-commit:\n  commands:\n    gitwal:\n      run: git wal hooks run pre-commit {0}\n")
    clone = hostile_clone(tmp_path, links={"lefthook.yml": "../outside/lefthook.yml"})
    proc = run(clone, "hooks", "status")
    assert "Traceback" not in proc.stderr, proc.stderr
    # What the link names outside the tree is not read: the entry is not there.
    assert "gitwal wrote nothing. Add to lefthook.yml" in proc.stdout, proc.stdout


# -- finding: hostile settings must not crash doctor/install -------------------------


@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_settings_linked_to_dev_zero_are_refused_not_read(tmp_path: Path, agent: str) -> None:
    clone = hostile_clone(tmp_path, links={AGENT_FILES[agent]: "/dev/zero"})
    refused(run(clone, "install", agent), "symbolic link")
    doctor = run(clone, "doctor")
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr, doctor.stderr
    assert f"FAIL agent {agent} (project: " in doctor.stdout
    assert "symbolic link" in doctor.stdout


@pytest.mark.parametrize(("agent", "rel", "text"), [
    ("claude", ".claude/settings.json", '{"a":' * DEEP + "1" + "}" * DEEP),
    ("claude", ".claude/settings.json", "[" * DEEP + "]" * DEEP),
    ("gemini", ".gemini/settings.json",
     "// a comment\n" + "[/* x */" * DEEP + "]" * DEEP),
    ("codex", ".codex/config.toml", "a = " + "[" * DEEP + "]" * DEEP + "\n"),
])
def test_settings_nested_100000_deep_are_an_error_not_a_traceback(
        tmp_path: Path, agent: str, rel: str, text: str) -> None:
    clone = hostile_clone(tmp_path, files={rel: text.encode()})
    args = ["install", agent] + (["--mcp"] if rel.endswith(".toml") else [])
    refused(run(clone, *args), "nests more than 64 levels deep")
    assert (clone / rel).read_text() == text
    doctor = run(clone, "doctor")
    assert "Traceback" not in doctor.stderr, doctor.stderr


def test_non_utf8_settings_name_the_byte_not_the_log(tmp_path: Path) -> None:
    data = b'{"model": "caf\xe9"}\n'
    clone = hostile_clone(tmp_path, files={".claude/settings.json": data,
                                           ".codex/config.toml": b'model = "\xff"\n'})
    proc = run(clone, "install", "claude")
    refused(proc, "not UTF-8 text", "0xe9")
    assert "written to the log" not in proc.stderr
    proc = run(clone, "install", "codex", "--mcp")
    refused(proc, "config.toml is not UTF-8 text", "0xff")
    assert "written to the log" not in proc.stderr
    doctor = run(clone, "doctor")
    assert "not UTF-8 text" in doctor.stdout and "Traceback" not in doctor.stderr
    assert (clone / ".claude" / "settings.json").read_bytes() == data


# -- the user's own files -------------------------------------------------------------


def test_a_users_linked_settings_file_is_written_where_it_points_and_named(
        tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    home = Path(os.environ["HOME"])
    dotfiles = home / "dotfiles" / "claude.json"
    dotfiles.parent.mkdir(parents=True)
    dotfiles.write_text('{"model": "opus"}\n')
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to(dotfiles)
    proc = run(repo, "install", "claude", "--scope", "user")
    assert proc.returncode == 0, proc.stderr
    assert f"gitwal wrote the file it names, {dotfiles}" in proc.stderr
    assert (home / ".claude" / "settings.json").is_symlink()  # the link stays
    merged = json.loads(dotfiles.read_text())
    assert merged["model"] == "opus" and "PreToolUse" in merged["hooks"]
    ok(repo, "uninstall", "claude", "--scope", "user")
    assert json.loads(dotfiles.read_text()) == {"model": "opus"}


def test_a_users_settings_file_must_still_be_a_bounded_regular_file(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    home = Path(os.environ["HOME"])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to("/dev/zero")
    refused(run(repo, "install", "claude", "--scope", "user"), "a device, not a regular file")


# -- the reader itself ----------------------------------------------------------------


def test_the_reader_bounds_size_and_kind(tmp_path: Path) -> None:
    top = tmp_path / "tree"
    top.mkdir()
    (top / "big.json").write_bytes(b" " * (MAX_BYTES + 1))
    with pytest.raises(UnsafeFile, match="larger than 1 MiB"):
        File.in_tree(top, "big.json").read()
    (top / "exact.json").write_bytes(b" " * MAX_BYTES)
    assert File.in_tree(top, "exact.json").read() == b" " * MAX_BYTES
    os.mkfifo(top / "fifo.json")  # never opened for a read that would block
    with pytest.raises(UnsafeFile, match="a FIFO, not a regular file"):
        File.in_tree(top, "fifo.json").read()
    with pytest.raises(UnsafeFile, match="a FIFO"):
        File(top / "fifo.json").read()
    assert File.in_tree(top, "absent/settings.json").read() is None
    (top / "plain").write_text("x")
    with pytest.raises(UnsafeFile, match="plain is a regular file"):
        File.in_tree(top, "plain/settings.json").read()


def test_depth_counts_brackets_outside_strings_and_comments() -> None:
    assert depth('{"a": ["[[[[", {"b": "}}}"}]}') == 3
    assert depth("a = [[1], [2]]  # [[[[[[\n[t]\nb = '[[['\nc = \"\"\"[[[\"\"\"\n",
                 toml=True) == 2
    assert depth("[" * DEEP) == 65  # the scan stops one past the limit
    assert load_json("[" * 64 + "]" * 64, Path("x")) is not None
    with pytest.raises(UnsafeFile, match="nests more than 64"):
        load_json("[" * 65 + "]" * 65, Path("x"))
