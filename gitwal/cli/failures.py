"""A command's failure as `error:` / `hint:` on stderr (and, under ``--json``,
the error document on stdout first) and a documented exit code, never a
traceback (docs/json.md, "Errors").

``handled`` wraps every command; where nothing else explains a failure, the
hint says whether the log has records written since the command started."""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click
import pygit2

from .. import documents
from ..base.display import safe
from ..base.errors import EXIT_ERROR, EXIT_USAGE, WalError
from ..base.repository import common_dir, open_repository
from .stdout import closed_stdout, emit_json

LIVE_PREFIX = "refs/wal/"

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, hint: str, code: int, kind: str = "WalError") -> NoReturn:
    """Report a failure and exit with ``code``: `error:`/`hint:` on stderr, and
    under ``--json`` first the error document on stdout (docs/json.md,
    "Errors"): ``kind`` names the error class (``UsageError`` for usage)."""
    if _json_requested():
        try:
            emit_json(documents.error(message, hint, kind, code))
        except (OSError, ValueError):
            pass  # stdout is gone: stderr and the exit code still tell
    try:
        click.echo(f"error: {_safe_lines(message)}", err=True)
        if hint:
            click.echo(f"hint: {_safe_lines(hint)}", err=True)
    except OSError:
        pass  # stderr is gone too: the exit code is all that is left
    sys.exit(code)


def _json_requested() -> bool:
    """Whether the failing command was asked for ``--json`` (``--format json``).

    Inside a command its parsed options say (an `apply` tool's live on its
    group); a usage error found while parsing comes before any option is
    known, so the command line before ``--`` says.
    """
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        argv = sys.argv[1:]
        argv = argv[:argv.index("--")] if "--" in argv else argv
        return "--json" in argv or "--format=json" in argv or any(
            pair == ("--format", "json") for pair in itertools.pairwise(argv))
    while ctx is not None:
        if ctx.params.get("as_json") or ctx.params.get("fmt") == "json" or (
                isinstance(ctx.obj, dict) and ctx.obj.get("json")):
            return True
        ctx = ctx.parent
    return False


def _safe_lines(text: str) -> str:
    """Each line made safe for a terminal (git's own multi-line stderr stays readable)."""
    return "\n".join(safe(line) for line in text.split("\n"))


def _appended_since(started_ns: int) -> list[str]:
    """Runs whose live ref moved from ``started_ns`` on: "run R (summary of its head)".

    An append rewrites the loose ref file ``refs/wal/<run>``, so its mtime
    says when (a packed ref has not moved since it was packed). The kernel
    stamps files with a clock that may lag ``time.time_ns()`` by a tick, so
    the caller passes a start a little early: this errs on the side of
    saying the log changed.
    """
    try:
        repo: pygit2.Repository | None = open_repository(os.getcwd())
    except (WalError, OSError):
        repo = None
    out: list[str] = []
    if repo is None:
        return out
    try:
        refs = common_dir(repo) / "refs" / "wal"
        names = sorted(e.name for e in os.scandir(refs)
                       if e.is_file() and e.stat().st_mtime_ns >= started_ns)
    except FileNotFoundError:
        return out
    except OSError:
        return ["a run (the log could not be read to say which)"]
    for name in names:
        ref = repo.references.get(LIVE_PREFIX + name)
        commit = repo.get(ref.target) if ref is not None else None
        summary = commit.message.strip() if isinstance(commit, pygit2.Commit) else "?"
        out.append(f"run {name} ({summary})")
    return out


def _hint_after(started: int, otherwise: str) -> str:
    """The truth about the log after a failure nothing else explained."""
    new = _appended_since(started)
    if not new:
        return otherwise
    return (f"the log has records written since this command started: {'; '.join(new)}; "
            "they are durable: `git wal status` shows them, and `git wal recover` decides "
            "any step left open")


def handled(fn: F) -> F:
    """Turn every failure into a message and an exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.time_ns() - 20_000_000  # 20 ms early: see _appended_since
        try:
            return fn(*args, **kwargs)
        except WalError as e:
            fail(e.message, e.hint, e.exit_code, type(e).__name__)
        except click.UsageError as e:  # raised by a command itself: reported as main does
            path = e.ctx.command_path if e.ctx else "git wal"
            fail(e.format_message(), f"see `{path} --help`", EXIT_USAGE, "UsageError")
        except BrokenPipeError:
            closed_stdout()
        except UnicodeError as e:
            fail(_unicode_message(e), _hint_after(
                started, "a file or directory name that is not UTF-8 cannot be logged: "
                "rename it (`git status` shows it) and run the command again; no record "
                "was appended (`git wal status` shows the log)"), EXIT_ERROR)
        except (pygit2.GitError, OSError) as e:
            fail(str(e) or type(e).__name__, _hint_after(
                started, "nothing was changed by the failed operation; `git wal status` "
                "shows the log"), EXIT_ERROR)
        except KeyboardInterrupt:
            fail("interrupted", "`git wal recover` decides any step left open", 130,
                 "Interrupted")

    return wrapper  # type: ignore[return-value]


def _unicode_message(e: UnicodeError) -> str:
    if isinstance(e, (UnicodeEncodeError, UnicodeDecodeError)) and isinstance(
            e.object, (str, bytes)):
        near = e.object[max(0, e.start - 30):e.end + 30]
        shown = safe(near if isinstance(near, str) else near.decode("utf-8", "surrogateescape"))
        return f"a name that is not valid UTF-8 cannot be written to the log (near: {shown})"
    return f"a name that is not valid UTF-8 cannot be handled: {e}"
