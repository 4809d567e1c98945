"""gitwal: a write-ahead log for coding agents, kept in git.

A harness imports this::

    from gitwal import Wal
    run = Wal(".").begin(task="rename getUserById -> fetchUser")
    run.apply("replace_symbol", path="src/a.ts", old="getUserById", new="fetchUser")
    report = Wal(".").recover(redo=True)
    print(report.prompt())
"""

from __future__ import annotations

from .errors import WalError
from .recovery import Report
from .run import Run, StepResult
from .wal import RunInfo, Status, Wal

__all__ = ["Report", "Run", "RunInfo", "Status", "StepResult", "Wal", "WalError"]
__version__ = "0.1.0"
