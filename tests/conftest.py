"""Shared fixtures: real git repositories in temp dirs, sealed from the
developer's own git config, home directory and runtime directory."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pygit2
import pytest
from pygit2.enums import ConfigLevel

from gitwal.records.model import AGENT_ENV

from .gitservers import GitDaemon, GitServer, HttpGitServer, ServerError

GIT_WAL = str(Path(sys.executable).parent / "git-wal")
TESTS = Path(__file__).resolve().parent

# -- the sealed environment ------------------------------------------------------

AGENT_MARKERS = {var for var, _agent in AGENT_ENV} | {"CODEX_HOME"}
IDENTITY = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com"}


@contextmanager
def sealed(home: Path, runtime: Path) -> Iterator[None]:
    """Give this process (and every git, git-wal and hook it starts) ``home`` as
    its home: git config, XDG dirs, gitwal's keys and trust, agent settings; and
    ``runtime`` (mode 0700, a short path: sockets live there) as XDG_RUNTIME_DIR,
    so hook servers are the test's own. The host's GIT_*/GITWAL_* are removed."""
    home.mkdir(parents=True, exist_ok=True)
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    nowhere = home / ".no-system-config"
    nowhere.mkdir(exist_ok=True)
    values = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_RUNTIME_DIR": str(runtime),
        "GIT_CONFIG_NOSYSTEM": "1",
        # The test's own global file ($HOME/.gitconfig), whatever HOME a child gets.
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        **IDENTITY,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }
    # libgit2 (pygit2, in this process) read its config search paths once, from the
    # HOME of the moment it was loaded; git reads them on every run.
    paths = {ConfigLevel.SYSTEM: nowhere, ConfigLevel.XDG: home / ".config" / "git",
             ConfigLevel.GLOBAL: home}
    saved = {level: pygit2.settings.search_path[level] for level in paths}
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            # An agent's markers (a suite run from inside an agent's shell tool)
            # and CODEX_HOME (which would point `install --trust` at the user's
            # own Codex config) stay outside.
            if key.startswith(("GIT_", "GITWAL_")) or key in AGENT_MARKERS:
                mp.delenv(key)
        for key, value in values.items():
            mp.setenv(key, value)
        try:
            for level, path in paths.items():
                pygit2.settings.search_path[level] = str(path)
            yield
        finally:
            for level, old in saved.items():
                pygit2.settings.search_path[level] = old


def _held(lock: Path) -> bool:
    with lock.open() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def stop_hook_servers(runtime: Path) -> None:
    """Stop the hook servers started under ``runtime`` (a server holds its lock
    for its whole life) the documented way: none may outlive its test."""
    if not any(_held(lock) for lock in (runtime / "gitwal").glob("*.lock")):
        return
    proc = subprocess.run([GIT_WAL, "agent-server", "--stop", "--all"], capture_output=True,
                          text=True, env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert proc.returncode == 0, f"stopping the test's hook servers: {proc.stderr}"


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    runtime = tmp_path_factory.mktemp("run")
    with sealed(tmp_path_factory.mktemp("home"), runtime):
        yield
        stop_hook_servers(runtime)


def wait_exit(pid: int, timeout: float = 60) -> None:
    """Block until process ``pid`` (a child or not) has exited: its files, and
    so its locks, are closed by then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"process {pid} did not exit within {timeout} s"
    finally:
        os.close(fd)


# -- slow tests ------------------------------------------------------------------------

# Whole modules (or folders) marked `slow`: `make check` leaves them out, `make test`
# runs them. Killed processes, power-loss states, torture, the person-edit sample,
# gc racing appends, the GitHub Action's script, hostile remotes (two clones and a
# server each) and the end-to-end runs. A slow test elsewhere (more than a few
# seconds on two idle cores) carries its own @pytest.mark.slow.
SLOW = frozenset({"test_crash_states.py", "test_random_kills.py", "test_torture.py",
                  "test_person_edits.py", "test_gc_during_appends.py", "test_action.py",
                  "test_fetch_safety.py", "e2e"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(TESTS) and path.relative_to(TESTS).parts[0] in SLOW:
            item.add_marker(pytest.mark.slow)


# -- the real home stays as it was -------------------------------------------------

# Read at import, before any test changed HOME.
REAL_HOME = Path(os.path.expanduser("~"))
WATCHED = (".config", ".ssh", ".claude", ".gitconfig")
_HOME_BEFORE = pytest.StashKey[dict[str, tuple[int, int]]]()


def home_listing(home: Path = REAL_HOME) -> dict[str, tuple[int, int]]:
    """Name -> (mtime_ns, size) of the home's top level and of the first level
    of the files git, gitwal and the agents keep there."""
    out: dict[str, tuple[int, int]] = {}
    for parent in (home, *(home / name for name in WATCHED)):
        try:
            entries = list(parent.iterdir()) if parent.is_dir() else [parent]
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                st = entry.lstat()
            except FileNotFoundError:
                continue
            out[str(entry.relative_to(home))] = (st.st_mtime_ns, st.st_size)
    return out


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")  # a pytest-xdist worker: the controller checks


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_worker(session.config):
        session.config.stash[_HOME_BEFORE] = home_listing()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_HOME_BEFORE, None)
    if before is None:
        return
    after = home_listing()
    changed = sorted(name for name in before.keys() | after.keys()
                     if before.get(name) != after.get(name))
    if changed:
        sys.stderr.write(f"\nerror: the test run created or modified {len(changed)} path(s) "
                         f"in the real home {REAL_HOME}: {', '.join(changed)}\n"
                         "hint: a test or a fixture ran without the sealed environment "
                         "(tests/conftest.py `sealed`)\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- repositories and the CLI ---------------------------------------------------------


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode()


def init_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    yield init_repo(tmp_path / "repo")


def wal(
    repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `git-wal` executable in ``repo``."""
    return subprocess.run(
        [GIT_WAL, *args], cwd=repo, input=input.decode() if input else None,
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )


def ok(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = wal(repo, *args, input=input)
    assert proc.returncode == 0, f"git wal {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def tree_of(repo: Path) -> str:
    """Tree id of the working tree (tracked + untracked, not ignored); no index touched."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "test-scratch.index")}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    out = subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def loose_object(repo: Path, oid: str) -> Path:
    """The path of ``oid`` as a loose object, every pack unpacked first.

    gitwal writes appends as kept packs; tests simulate a lost object by
    deleting it, which needs it loose."""
    packs = repo / ".git" / "objects" / "pack"
    for pack in sorted(packs.glob("pack-*.pack")):
        data = pack.read_bytes()
        for suffix in (".idx", ".pack", ".keep", ".rev", ".bitmap"):
            pack.with_suffix(suffix).unlink(missing_ok=True)
        subprocess.run(["git", "unpack-objects", "-q"], cwd=repo, input=data, check=True)
    return repo / ".git" / "objects" / oid[:2] / oid[2:]


# -- real git servers on 127.0.0.1 (tests/gitservers.py) -----------------------------

S = TypeVar("S", bound=GitServer)


@contextmanager
def serving(server: S) -> Iterator[S]:
    """``server`` started, stopped (with every process it started) at the end.
    A missing program fails the test, naming `make tools`: never a skip."""
    try:
        server.start()
    except ServerError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_git_server(tmp_path: Path) -> Iterator[HttpGitServer]:
    """git's smart HTTP (`git http-backend` behind lighttpd), started for this test."""
    with serving(HttpGitServer(tmp_path / "http-git-server")) as server:
        yield server


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[GitDaemon]:
    """A `git daemon` (git://, receive-pack enabled), started for this test."""
    with serving(GitDaemon(tmp_path / "git-daemon")) as server:
        yield server


@pytest.fixture(params=["http", "daemon"])
def git_server(request: pytest.FixtureRequest) -> GitServer:
    """Each real server in turn: smart HTTP, then git://."""
    name = "http_git_server" if request.param == "http" else "git_daemon"
    server: GitServer = request.getfixturevalue(name)
    return server
