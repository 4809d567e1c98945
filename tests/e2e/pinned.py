"""The agent command-line programs the end-to-end tests run, pinned, installed
from the npm registry into a cache directory, and found.

``python -m tests.e2e.pinned [NAME...]`` installs (idempotently) every pinned
program (or the ones named) and prints their paths. Tests and benchmarks call
:func:`find`, which installs on first use.

* Each version is exact (:data:`PINS`): hook payloads, resume transcripts and
  model requests are the program's behaviour, so a new version is a one-line
  change followed by a run of the suite (its recorded payload fixtures fail
  first when what it sends changed).
* The cache is ``<repo>/.cache/<name>/<version>/`` (ignored by git), or
  ``$GITWAL_<NAME>_CACHE/<version>/``; ``GITWAL_<NAME>_BIN=/path`` uses that
  binary instead (its version must still be the pinned one).
* Without ``npm``, or when the registry cannot be reached, :func:`find` returns
  the reason instead of a path, and the tests skip with it
  (``GITWAL_E2E_REQUIRE=1`` turns the skip into a failure).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Pin:
    """One pinned program: its npm package, version and where its binary lands."""

    name: str  # cache directory and environment variable stem (CLAUDE, CODEX, ...)
    package: str
    version: str
    binaries: tuple[str, ...]  # globs under the install prefix, tried in order
    env: tuple[tuple[str, str], ...] = ()  # set when asking for --version

    @property
    def stem(self) -> str:
        return re.sub(r"[^A-Z0-9]", "_", self.name.upper())


CLAUDE = Pin(
    "claude-code", "@anthropic-ai/claude-code", "2.1.328",
    # The wrapper's postinstall copies the platform binary over bin/claude.exe; if
    # npm did not run install scripts, the platform package's own binary is used.
    ("node_modules/.bin/claude", "node_modules/@anthropic-ai/claude-code-linux-*/claude",
     "node_modules/@anthropic-ai/claude-code-darwin-*/claude"),
    (("DISABLE_AUTOUPDATER", "1"),))
CODEX = Pin("codex", "@openai/codex", "0.169.0", ("node_modules/.bin/codex",))
GEMINI = Pin("gemini-cli", "@google/gemini-cli", "0.61.0", ("node_modules/.bin/gemini",),
             (("GEMINI_CLI_NO_RELAUNCH", "true"),))
PINS = {p.name: p for p in (CLAUDE, CODEX, GEMINI)}


@dataclass(frozen=True)
class Found:
    """The binary, or why there is none."""

    path: Path | None
    reason: str


def cache_dir(pin: Pin) -> Path:
    base = os.environ.get(f"GITWAL_{pin.stem}_CACHE") or str(ROOT / ".cache" / pin.name)
    return Path(base) / pin.version


def version_of(pin: Pin, binary: Path) -> str | None:
    """The version ``BINARY --version`` prints, or None if it does not run."""
    # A throwaway HOME: Gemini CLI writes ~/.gemini/projects.json even for --version.
    with tempfile.TemporaryDirectory(prefix="gwpin-") as home:
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                                 timeout=120, env={**os.environ, **dict(pin.env), "HOME": home})
        except (OSError, subprocess.TimeoutExpired):
            return None
    words = out.stdout.split()
    if out.returncode != 0 or not words:
        return None
    # "2.1.328 (Claude Code)", "codex-cli 0.169.0", "0.61.0"
    return next((w for w in words if re.fullmatch(r"\d+\.\d+\.\d+\S*", w)), None)


def _installed(pin: Pin, prefix: Path) -> Path | None:
    for pattern in pin.binaries:
        for c in sorted(prefix.glob(pattern)):
            if c.exists() and version_of(pin, c) == pin.version:
                return c
    return None


def find(pin: Pin, install: bool = True) -> Found:
    """The pinned binary, installing it into the cache if needed."""
    explicit = os.environ.get(f"GITWAL_{pin.stem}_BIN")
    if explicit:
        got = version_of(pin, Path(explicit))
        if got != pin.version:
            return Found(None, f"GITWAL_{pin.stem}_BIN={explicit} is version {got}, "
                               f"not {pin.version}")
        return Found(Path(explicit), "")
    spec = f"{pin.package}@{pin.version}"
    prefix = cache_dir(pin)
    found = _installed(pin, prefix)
    if found or not install:
        return Found(found, "" if found else f"{spec} is not installed in {prefix}")
    npm = shutil.which("npm")
    if npm is None:
        return Found(None, f"npm is not installed: cannot install {spec}")
    prefix.mkdir(parents=True, exist_ok=True)
    # Two processes (a test run and a benchmark) may install at once: one does.
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _installed(pin, prefix)
        if found:
            return Found(found, "")
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--no-save", "--loglevel=error", spec],
            capture_output=True, text=True, timeout=900,
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return Found(None, f"npm install {spec} failed: " + " / ".join(tail))
        found = _installed(pin, prefix)
    if found is None:
        return Found(None, f"{spec} installed in {prefix} but no binary runs")
    return Found(found, "")


def main(argv: list[str]) -> int:
    unknown = [n for n in argv if n not in PINS]
    if unknown:
        print(f"unknown program(s): {', '.join(unknown)} (known: {', '.join(PINS)})",
              file=sys.stderr)
        return 2
    rc = 0
    for name in argv or list(PINS):
        found = find(PINS[name])
        if found.path is None:
            print(f"{name}: {found.reason}", file=sys.stderr)
            # No npm at all is a machine without the tools: the tests skip. An
            # npm that fails is an error worth stopping for.
            rc = rc if shutil.which("npm") is None else 1
        else:
            print(found.path)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
