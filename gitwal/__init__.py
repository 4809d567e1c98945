"""gitwal: a write-ahead log for coding agents, kept in git.

A harness imports this::

    from gitwal import Wal, render
    run = Wal(".").begin(task="rename getUserById -> fetchUser")
    run.apply("replace_symbol", path="src/a.ts", old="getUserById", new="fetchUser")
    report = Wal(".").recover(redo=True)
    print(render(report))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import WalError
from .version import VERSION

if TYPE_CHECKING:
    from .prompt import render
    from .report import Report
    from .run import Run, StepResult
    from .wal import RunInfo, Status, Wal

__all__ = ["Report", "Run", "RunInfo", "Status", "StepResult", "Wal", "WalError", "render"]
__version__ = VERSION

# Loaded on first use: `import gitwal.<module>` must not pay for pygit2 when
# that module does not need it (agent hook clients, `--help`).
_LAZY = {"Report": "report", "render": "prompt", "Run": "run", "StepResult": "run",
         "RunInfo": "wal", "Status": "wal", "Wal": "wal"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gitwal' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
