"""Where gitwal keeps per-user files: ``$XDG_CONFIG_HOME/gitwal``.

Outside every repository on purpose: the signing key and the allowed-signers
file must not be committed, pushed, or edited by whoever can write the
repository (docs/security.md).
"""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/gitwal``, or ``~/.config/gitwal`` when it is unset or relative
    (the XDG spec says to ignore a relative value)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "gitwal"
