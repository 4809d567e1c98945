"""Which Claude Code this machine runs, and whether it takes ``"onFailure":
"block"`` on a hook (docs/agents.md, "When a hook itself fails").

Without it, Claude Code lets a tool call go on when its PreToolUse hook
times out or crashes past the hook command's own checks: the change would
land with no intent before it. Claude Code 2.1.295 and newer block the call
instead when the handler says ``"onFailure": "block"``; an older one is not
given the key (what it would make of it is not known), and doctor says so.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

__all__ = ["BLOCK_SINCE", "installed", "takes_block", "version_text"]

BLOCK_SINCE = (2, 1, 295)
VERSION_TIMEOUT = 20.0  # seconds `claude --version` may take (a cold start of a big binary)
_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)\b")


@functools.cache
def installed() -> tuple[int, int, int] | None:
    """The version of the ``claude`` on PATH; None when there is none, or it
    does not say. Asked once per process: doctor looks at up to three
    settings files, and a `claude --version` is a start of a large binary."""
    found = shutil.which("claude")
    if found is None:
        return None
    try:
        proc = subprocess.run([found, "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=VERSION_TIMEOUT,
                              env={**os.environ, "CLAUDE_CODE_DISABLE_AUTOUPDATER": "1"})
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.search(proc.stdout) if proc.returncode == 0 else None
    return None if m is None else (int(m[1]), int(m[2]), int(m[3]))


def takes_block(version: tuple[int, int, int] | None) -> bool:
    return version is not None and version >= BLOCK_SINCE


def version_text(version: tuple[int, int, int] | None) -> str:
    return "not found on PATH" if version is None else ".".join(map(str, version))
