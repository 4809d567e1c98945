"""Install the pinned Claude Code CLI into a cache directory and find it.

``python -m tests.e2e.install_claude`` installs (idempotently) and prints the
binary's path. The end-to-end tests and ``bench/claude_session.py`` call
:func:`find_claude`, which installs on first use.

* The version is pinned (:data:`VERSION`); the cache is
  ``<repo>/.cache/claude-code/<version>/`` (ignored by git), or
  ``$GITWAL_CLAUDE_CACHE/<version>/``.
* ``GITWAL_CLAUDE_BIN=/path/to/claude`` uses that binary instead (its version
  must still be the pinned one).
* Without ``npm``, or when the registry cannot be reached, :func:`find_claude`
  returns the reason instead of a path, and the tests skip with it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "@anthropic-ai/claude-code"
VERSION = "2.1.328"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Found:
    """The binary, or why there is none."""

    path: Path | None
    reason: str


def cache_dir() -> Path:
    base = os.environ.get("GITWAL_CLAUDE_CACHE") or str(ROOT / ".cache" / "claude-code")
    return Path(base) / VERSION


def version_of(binary: Path) -> str | None:
    """The version ``claude --version`` prints, or None if it does not run."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             timeout=60, env={**os.environ, "DISABLE_AUTOUPDATER": "1"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.split()[0]


def _candidates(prefix: Path) -> list[Path]:
    # The wrapper's postinstall copies the platform binary over bin/claude.exe; if
    # npm did not run install scripts, the platform package's own binary is used.
    mods = prefix / "node_modules" / "@anthropic-ai"
    return [prefix / "node_modules" / ".bin" / "claude",
            *sorted(mods.glob("claude-code-linux-*/claude")),
            *sorted(mods.glob("claude-code-darwin-*/claude"))]


def _installed(prefix: Path) -> Path | None:
    for c in _candidates(prefix):
        if c.exists() and version_of(c) == VERSION:
            return c
    return None


def find_claude(install: bool = True) -> Found:
    """The pinned ``claude`` binary, installing it into the cache if needed."""
    explicit = os.environ.get("GITWAL_CLAUDE_BIN")
    if explicit:
        got = version_of(Path(explicit))
        if got != VERSION:
            return Found(None, f"GITWAL_CLAUDE_BIN={explicit} is version {got}, not {VERSION}")
        return Found(Path(explicit), "")
    prefix = cache_dir()
    found = _installed(prefix)
    if found or not install:
        return Found(found, "" if found else f"{PACKAGE}@{VERSION} is not installed in {prefix}")
    npm = shutil.which("npm")
    if npm is None:
        return Found(None, f"npm is not installed: cannot install {PACKAGE}@{VERSION}")
    prefix.mkdir(parents=True, exist_ok=True)
    # Two processes (a test run and a benchmark) may install at once: one does.
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _installed(prefix)
        if found:
            return Found(found, "")
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--no-save", "--loglevel=error", f"{PACKAGE}@{VERSION}"],
            capture_output=True, text=True, timeout=900,
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return Found(None, f"npm install {PACKAGE}@{VERSION} failed: " + " / ".join(tail))
        found = _installed(prefix)
    if found is None:
        return Found(None, f"{PACKAGE}@{VERSION} installed in {prefix} but no binary runs")
    return Found(found, "")


def main() -> int:
    found = find_claude()
    if found.path is None:
        print(f"claude-code: {found.reason}", file=sys.stderr)
        # No npm at all is a machine without the tool: the tests skip. An npm
        # that fails is an error worth stopping for.
        return 0 if shutil.which("npm") is None else 1
    print(found.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
