"""`git wal verify` over a selection of runs: check each run in turn and
gather the results into one report (the checks: verify/checks.py).

Failures are data; a :class:`WalError` means the request itself is wrong (a
branch that does not exist, a signature requirement with no trusted keys).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from ..base.errors import WalError
from ..log.runs import LOCAL
from ..log.segments import Failure
from ..signing.allowed_signers import load_allowed
from .branch import resolve
from .checks import DEFAULT_CHECKS, Check, Options, RunContext
from .session import Session

Progress = Callable[[int, int, str, str], None]  # (n, of, run, what is being done)


@dataclass(frozen=True)
class RunResult:
    run: str
    records: int
    failures: tuple[Failure, ...]
    branch: str | None = None
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "ok": self.ok, "records": self.records,
                "failures": [f.to_dict() for f in self.failures],
                "branch": self.branch, "notes": list(self.notes)}


@dataclass(frozen=True)
class Report:
    runs: tuple[RunResult, ...]
    allowed_signers: str | None = None  # the file signatures were checked against

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [r.to_dict() for r in self.runs], "ok": self.ok,
                "allowed_signers": self.allowed_signers}


def verify(repo: pygit2.Repository, runs: Sequence[str], options: Options = Options(),
           checks: Sequence[Check] = DEFAULT_CHECKS,
           progress: Progress | None = None, namespace: str = LOCAL) -> Report:
    """Verify ``runs``; failures are data, a WalError means the request itself is wrong.

    The logs are read under ``namespace``: this repository's own refs by default,
    or a copy kept under another root, e.g. ``refs/wal-remote/origin/`` for what
    remote origin held at the last fetch (gitwal/remote/fetch.py)."""
    if options.branch is not None and resolve(repo, options.branch) is None:
        raise WalError(f"no branch, ref or commit named {options.branch!r}",
                       "pass --branch an existing branch (e.g. main) or ref")
    if options.allowed_signers is None and (options.require_signed or options.require_sealed):
        flag = "--require-signed" if options.require_signed else "--require-sealed"
        raise WalError(f"{flag} needs an allowed-signers file: a signature by any key "
                       "proves nothing", "pass --allowed-signers FILE (git's "
                       "gpg.ssh.allowedSignersFile format; `git wal trust add` writes one)")
    allowed = None if options.allowed_signers is None else load_allowed(options.allowed_signers)
    session = Session(repo, allowed, namespace)
    session.runs = runs
    results = []
    for n, run in enumerate(runs, 1):
        start = time.monotonic()
        if progress:
            progress(n, len(runs), run, "reading the log")
        loaded = session.load(run)
        ctx = RunContext(repo, run, list(loaded.segments), list(loaded.history), loaded.plan,
                         options, session)
        failures = list(loaded.failures)
        for check in checks:
            if progress:
                progress(n, len(runs), run, f"{check.name} check")
            try:
                failures += check(ctx)
            except (LookupError, ValueError, pygit2.GitError) as e:
                # A repository broken in a way no check foresaw (an object
                # missing under a tree that exists, say) is a failure of this
                # run, not a traceback that hides the other runs' results.
                failures.append(Failure(run, check.name, f"could not finish: {e!r}"))
        results.append(RunResult(run, len(loaded.history), tuple(dict.fromkeys(failures)),
                                 ctx.branch, tuple(ctx.notes), time.monotonic() - start))
    return Report(tuple(results), None if options.allowed_signers is None
                  else str(options.allowed_signers))
