"""Run logs on remotes: `git wal push`, `git wal fetch`, `git wal remote setup`.

The commands' entry points: push.py sends logs, fetch.py brings them in,
both with the vocabulary of remote_refs.py; ``setup`` lives here. Nothing
forces a log (docs/remotes.md): git refuses any push that is not a
fast-forward unless it is an explicit compare-and-swap, and a fetched log
moves a local ref only by compare-and-swap, after it passed the chain checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..base.errors import WalError
from .fetch import fetch
from .push import push
from .refs import (
    NEEDS_ATTENTION,
    RefOutcome,
    Transfer,
    fetch_refspecs,
    last_line,
    push_refspecs,
    resolve_remote,
    run_git,
    staging_prefix,
)

__all__ = ["NEEDS_ATTENTION", "ConfigChange", "RefOutcome", "Transfer", "fetch", "push",
           "setup", "staging_prefix"]


@dataclass(frozen=True)
class ConfigChange:
    key: str
    value: str
    added: bool  # False: it was configured already


def setup(cwd: Path, remote: str) -> list[ConfigChange]:
    """Make plain `git push` / `git fetch` carry logs to and from ``remote``; idempotent.

    A configured push refspec replaces push.default, so when the remote had
    none, ``HEAD`` is added first: plain `git push` then still pushes the
    current branch (to the branch of the same name). Fetch refspecs go to the
    staging namespace, so a diverged log never makes `git fetch` fail;
    `git wal fetch --offline` integrates what it brought.
    """
    name = resolve_remote(cwd, remote)
    changes = []
    wanted = {f"remote.{name}.push": push_refspecs(),
              f"remote.{name}.fetch": fetch_refspecs(name)}
    for key, values in wanted.items():
        have = run_git(cwd, "config", "--get-all", key).stdout.splitlines()
        if key.endswith(".push") and (not have or "HEAD" in have):
            values = ["HEAD", *values]
        for value in values:
            if value in have:
                changes.append(ConfigChange(key, value, False))
                continue
            proc = run_git(cwd, "config", "--add", key, value)
            if proc.returncode != 0:
                raise WalError(f"cannot set {key}: {last_line(proc.stderr)}",
                               "check that the repository's config file is writable")
            changes.append(ConfigChange(key, value, True))
    return changes
