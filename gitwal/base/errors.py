"""One error type for everything a user can get wrong or that goes wrong on disk.

Every failure the CLI reports is a :class:`WalError`: a one-line message, a
hint naming the next command to run, and the exit code documented in README.
"""

from __future__ import annotations

# Exit codes (README "Exit codes"): keep in sync with the CLI.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_IN_DOUBT = 3
EXIT_LOCK_TIMEOUT = 4  # the run lock stayed busy past --wait-timeout
EXIT_NOT_ON_REMOTE = 5  # committed here, but the remote did not take it in time (durability commit)
EXIT_TAKEN_OVER = 6  # the run goes on elsewhere: the remote holds appends this clone did not write


class WalError(Exception):
    """A failure with a message for people, a hint, and an exit code."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotARepository(WalError):
    """The directory is not inside a git working tree."""


class PathRefused(WalError):
    """A path leaves the working tree, goes through .git, or is otherwise unsafe."""


class ToolRefused(WalError):
    """A tool's arguments cannot produce a post-image (nothing was logged)."""


class CorruptLog(WalError):
    """A record or the chain holding it cannot be trusted."""


class UnknownRun(WalError):
    """No such run, or no current run."""


class RunBusy(WalError):
    """Another live process holds the run, or a ref update lost a race."""


class StepFailed(WalError):
    """A step was logged but did not verify; an abort record says why."""


class InDoubt(WalError):
    """Recovery cannot decide without a person: something is in doubt."""

    exit_code = EXIT_IN_DOUBT


class NeedsApproval(WalError):
    """An irreversible step is logged and waits for a person's approval
    (`git wal approve LSN`); nothing of it has run."""

    exit_code = EXIT_IN_DOUBT


class NotOnRemote(WalError):
    """A step is committed in the local log, but ``wal.remote.durability commit``
    asked for it on the remote too, and the remote did not take it in time."""

    exit_code = EXIT_NOT_ON_REMOTE


class TakenOver(WalError):
    """The run's remote holds appends this clone did not write and its own do
    not extend (another clone took the run over, `git wal resume`): this clone
    is fenced off the run, its steps refused, nothing of it pushed."""

    exit_code = EXIT_TAKEN_OVER
