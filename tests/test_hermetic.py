"""The sealed test environment (tests/conftest.py): each test has its own home,
config, runtime dir and git config, in this process and in what it starts; and
the run notices a change to the real home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel

from .conftest import REAL_HOME, TESTS, git, home_listing

# Read at import: the autouse `hermetic` fixture removes GITWAL_* variables.
LEAK = os.environ.get("GITWAL_TEST_LEAK_HOME") == "1"


def test_home_config_and_runtime_dirs_are_the_tests_own(repo: Path) -> None:
    home = Path(os.environ["HOME"])
    assert home != REAL_HOME and home.is_dir()
    for key in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        assert Path(os.environ[key]).is_relative_to(home), key
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    assert not runtime.is_relative_to(REAL_HOME) and runtime.stat().st_mode & 0o077 == 0
    assert len(str(runtime / "gitwal" / ("x" * 20 + ".sock"))) < 108
    # git (a child) and libgit2 (this process) read the test's global config only.
    git(repo, "config", "--global", "wal.sealed", "yes")
    assert (home / ".gitconfig").read_text().count("sealed = yes") == 1
    assert pygit2.Repository(str(repo)).config["wal.sealed"] == "yes"
    assert pygit2.settings.search_path[ConfigLevel.GLOBAL] == str(home)
    out = subprocess.run(["git", "config", "--show-origin", "--list"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    assert all(str(REAL_HOME) + "/" not in line or line.startswith(f"file:{home}")
               for line in out.splitlines()), out


def test_each_test_has_a_new_home(tmp_path: Path) -> None:
    # What another test wrote in its home (a global config) is not seen here.
    assert not (Path(os.environ["HOME"]) / ".gitconfig").exists()


def test_the_home_listing_sees_a_change_at_the_top_and_in_watched_dirs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".gitconfig").write_text("")
    before = home_listing(home)
    assert home_listing(home) == before
    (home / ".config" / "gitwal").mkdir()
    assert set(home_listing(home)) - set(before) == {".config/gitwal"}
    before = home_listing(home)
    os.utime(home / ".gitconfig", ns=(1, 1))  # modified in place
    assert home_listing(home)[".gitconfig"] != before[".gitconfig"]
    (home / ".ssh").mkdir()
    assert {".ssh"} <= set(home_listing(home)) - set(before)


def test_a_run_that_changes_the_real_home_fails(tmp_path: Path) -> None:
    if LEAK:  # the inner run below: write where the fixtures cannot redirect
        (REAL_HOME / ".config" / "leaked").write_text("x\n")
        return
    fake = tmp_path / "real-home"
    (fake / ".config").mkdir(parents=True)
    me = f"{Path(__file__).name}::test_a_run_that_changes_the_real_home_fails"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", me],
                          cwd=TESTS, capture_output=True, text=True,
                          env={**os.environ, "HOME": str(fake), "GITWAL_TEST_LEAK_HOME": "1"})
    assert "1 passed" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"error: the test run created or modified 2 path(s) in the real home {fake}: "
            ".config, .config/leaked") in proc.stderr
