"""The hooks gitwal ships live in hooks/ (one folder per host) and are installed
with the wheel as gitwal._hooks: a gitwal installed from the wheel, not only
one run from this checkout, finds and installs them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from .conftest import git, init_repo

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ("git", "codex", "gemini")


def shipped(host: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ROOT / "hooks" / host).iterdir())
            if p.is_file()}


def build_wheel(tmp_path: Path) -> Path:
    # Build from a copy: an in-tree build would leave build/ and *.egg-info here.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("gitwal", "hooks", "man"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    dist = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q",
                           "-w", str(dist)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = dist.glob("gitwal-*.whl")
    return wheel


def test_the_package_list_names_every_package_under_gitwal() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "gitwal").rglob("__init__.py")}
    assert set(config["packages"]) == found | {"gitwal._hooks"}
    assert config["package-dir"] == {"gitwal._hooks": "hooks"}


def test_the_wheel_holds_every_hook_and_an_installed_gitwal_uses_them(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)

    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for host in HOSTS:
            files = shipped(host)
            assert files, host
            for name, data in files.items():
                assert z.read(f"gitwal/_hooks/{host}/{name}") == data
        assert "gitwal/_hooks/claude-code/hooks/hooks.json" in names
        assert "gitwal/_hooks/claude-code/.claude-plugin/plugin.json" in names
        assert not any("hook_scripts" in n for n in names)
        # PEP 561: a type checker reads gitwal's own annotations.
        assert z.read("gitwal/py.typed") == b""
        info = "gitwal-0.1.0.dist-info"
        assert z.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = z.read(f"{info}/METADATA").decode()
        assert "License-Expression: MIT" in metadata
        assert "Project-URL: Issues, https://github.com/gitwal/gitwal/issues" in metadata
        assert "Classifier: Operating System :: POSIX :: Linux" in metadata
        assert "Classifier: Programming Language :: Python :: 3.13" in metadata
        # git-wal(1) as a data file: it lands in <prefix>/share/man/man1.
        assert z.read("gitwal-0.1.0.data/data/share/man/man1/git-wal.1") == (
            ROOT / "man" / "git-wal.1").read_bytes()
        site = tmp_path / "site"
        z.extractall(site)

    # The unpacked wheel comes first on the path (and the current directory is
    # not this checkout): the editable install of this checkout is not what runs.
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import gitwal; print(gitwal.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(site)
    repo = init_repo(tmp_path / "repo")
    proc = subprocess.run([sys.executable, "-m", "gitwal", "hooks", "install"], cwd=repo,
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    hooks = Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "hooks"
    scripts = shipped("git")
    for name in ("pre-commit", "reference-transaction"):
        assert (hooks / name).read_bytes() == scripts[name]
        assert os.access(hooks / name, os.X_OK)


def test_an_installed_gitwal_answers_git_wal_help_with_its_man_page(tmp_path: Path) -> None:
    """git runs `man git-wal` for `git wal --help`: the page the wheel installs
    into <venv>/share/man is found from <venv>/bin on PATH, with no root and
    no MANPATH."""
    wheel = build_wheel(tmp_path)
    # A venv of its own; its dependencies (pygit2, click, ...) come from this
    # one's site-packages, after its own (so not this checkout's editable gitwal).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    page = venv / "share" / "man" / "man1" / "git-wal.1"
    assert page.read_bytes() == (ROOT / "man" / "git-wal.1").read_bytes()
    assert (Path(site) / "gitwal" / "py.typed").exists()

    repo = init_repo(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "PYTHONPATH")}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", MANPAGER="cat", PAGER="cat",
               MANWIDTH="80", GIT_PAGER="cat")
    assert shutil.which("git-wal", path=env["PATH"]) == str(venv / "bin" / "git-wal")
    where = subprocess.run([str(python), "-c", "import gitwal; print(gitwal.__file__)"],
                           cwd=repo, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(site)
    shown = subprocess.run(["git", "wal", "help", "status"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith("Usage: git wal status ")
    if shutil.which("man", path=env["PATH"]) is None:
        pytest.skip("man is not installed: `git wal --help` needs it (git runs `man git-wal`)")
    found = subprocess.run(["man", "-w", "git-wal"], cwd=repo, env=env, capture_output=True,
                           text=True)
    assert (found.returncode, found.stdout) == (0, f"{page}\n"), found.stderr
    manual = subprocess.run(["git", "wal", "--help"], cwd=repo, env=env, capture_output=True,
                            text=True)
    assert manual.returncode == 0, manual.stderr
    lines = [line.strip() for line in manual.stdout.splitlines()]
    assert lines[0].startswith("GIT-WAL(1)")
    assert "git-wal - a write-ahead log for coding agents, kept in git" in lines
