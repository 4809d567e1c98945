"""gitwal: a write-ahead log for coding agents, kept in git.

A harness imports this::

    from gitwal import Wal, render
    run = Wal(".").begin(task="rename getUserById -> fetchUser")
    run.replace_symbol("src/a.ts", "getUserById", "fetchUser")
    report = Wal(".").recover(redo=True)
    print(render(report))

The package is typed (``py.typed``). The error classes and id types load
with it; the rest on first use (``__getattr__`` below), so that
``import gitwal`` does not pay for pygit2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base.errors import (
    EXIT_ERROR,
    EXIT_IN_DOUBT,
    EXIT_LOCK_TIMEOUT,
    EXIT_NOT_ON_REMOTE,
    EXIT_OK,
    EXIT_TAKEN_OVER,
    EXIT_USAGE,
    CorruptLog,
    InDoubt,
    NotARepository,
    NotOnRemote,
    PathRefused,
    RunBusy,
    StepFailed,
    TakenOver,
    ToolRefused,
    UnknownRun,
    WalError,
)
from .base.ids import BlobId, CommitId, Lsn, RunId, TreeId
from .base.version import VERSION

if TYPE_CHECKING:
    from .decisions.approvals import approve
    from .decisions.resolve import resolve
    from .decisions.undo import redo, undo
    from .recovery.prompt import render
    from .recovery.report import Report
    from .run import Run
    from .status import RunInfo, Status
    from .steps_api import StepResult
    from .wal import Wal

__all__ = [
    "EXIT_ERROR", "EXIT_IN_DOUBT", "EXIT_LOCK_TIMEOUT", "EXIT_NOT_ON_REMOTE", "EXIT_OK",
    "EXIT_TAKEN_OVER", "TakenOver",
    "EXIT_USAGE", "BlobId", "CommitId", "CorruptLog", "InDoubt", "Lsn", "NotARepository",
    "NotOnRemote", "PathRefused",
    "Report", "Run", "RunBusy", "RunId", "RunInfo", "Status", "StepFailed", "StepResult",
    "ToolRefused", "TreeId", "UnknownRun", "Wal", "WalError", "approve", "redo", "render",
    "resolve", "undo",
]
__version__ = VERSION

# Loaded on first use: `import gitwal.<module>` must not pay for pygit2 when
# that module does not need it (agent hook clients, `--help`).
_LAZY = {"Report": "recovery.report", "render": "recovery.prompt", "Run": "run",
         "StepResult": "steps_api", "RunInfo": "status", "Status": "status", "Wal": "wal",
         "resolve": "decisions.resolve", "approve": "decisions.approvals",
         "undo": "decisions.undo", "redo": "decisions.undo"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gitwal' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
