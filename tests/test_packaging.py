"""The hooks gitwal ships live in hooks/ (one folder per host) and are installed
with the wheel as gitwal._hooks: a gitwal installed from the wheel, not only
one run from this checkout, finds and installs them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from .conftest import git, init_repo

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ("git", "codex", "gemini")


def shipped(host: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ROOT / "hooks" / host).iterdir())
            if p.is_file()}


def test_the_package_list_names_every_package_under_gitwal() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "gitwal").rglob("__init__.py")}
    assert set(config["packages"]) == found | {"gitwal._hooks"}
    assert config["package-dir"] == {"gitwal._hooks": "hooks"}


def test_the_wheel_holds_every_hook_and_an_installed_gitwal_uses_them(tmp_path: Path) -> None:
    # Build from a copy: an in-tree build would leave build/ and *.egg-info here.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("gitwal", "hooks"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    dist = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q",
                           "-w", str(dist)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = dist.glob("gitwal-*.whl")

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
