"""`git wal`: a thin click layer over the library. Each command parses its
arguments, calls one library function, and prints the result (``--json`` for
tools). Errors become ``error: ...`` / ``hint: ...`` on stderr and a
documented exit code, never a traceback. A command's module is imported only
when that command runs (:data:`COMMANDS`, cli/lazy.py)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click
import pygit2

from .. import documents
from ..base.display import safe
from ..base.errors import EXIT_ERROR, EXIT_USAGE, WalError
from ..base.repository import common_dir, open_repository
from .lazy import LazyGroup

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


def closed_stdout() -> NoReturn:
    """The reader of our output went away (`git wal log | head -1`): end quietly.

    git's convention: the process dies of SIGPIPE, with no message (the shell
    reports 141). Whatever the command did is as durable as if it had
    printed its result.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError):
        pass
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(141)


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


def emit_json(data: Any) -> None:
    """One document on stdout (docs/json.md): one line, keys sorted. Written
    as it is encoded: no copy of the whole document in memory (a long run's
    report lists every committed step)."""
    json.dump(data, sys.stdout, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


def refuse_unsupported_platform() -> None:
    """gitwal needs POSIX (directory descriptors, ``O_NOFOLLOW``, fsync of
    directories, process groups): elsewhere say so before anything runs."""
    if sys.platform == "win32" or os.name != "posix":
        fail(f"gitwal does not run on this platform ({sys.platform})",
             "gitwal supports Linux (README \"Supported platforms\"); on Windows, "
             "run it inside WSL 2", EXIT_ERROR)


@contextlib.contextmanager
def commands_to_stderr(active: bool) -> Iterator[None]:
    """Under ``--json`` the document is the only thing on stdout: while the
    body runs (an `exec` step, a `--check`, a redone step), fd 1 is a copy of
    fd 2, which the commands gitwal starts inherit, so what they print goes
    to stderr, where people still see it (docs/json.md).

    Python's own stdout is flushed first, so nothing written before lands
    after the swap; fd 1 is put back even when the body raises (the error
    document that follows must reach stdout).
    """
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class WalGroup(LazyGroup):
    """Usage errors, too, print `error:` and `hint:` (exit 2)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        refuse_unsupported_platform()
        kwargs["standalone_mode"] = False
        kwargs.setdefault("prog_name", "git wal")
        # click would derive "_GIT WAL_COMPLETE" from the name (cli/completion.py).
        kwargs.setdefault("complete_var", "_GIT_WAL_COMPLETE")
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as e:
            # Not `--help`: git hands `git wal --help` to man (cli/manpage.py).
            path = e.ctx.command_path if e.ctx else "git wal"
            fail(e.format_message(), f"see `{path} -h`", EXIT_USAGE, "UsageError")
        except click.ClickException as e:
            fail(e.format_message(), "", e.exit_code)
        except click.Abort:
            fail("aborted", "", EXIT_ERROR)
        except BrokenPipeError:
            closed_stdout()
        sys.exit(code if isinstance(code, int) else 0)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.epilog is None:
            from .examples import EXAMPLES

            command.epilog = EXAMPLES.get(cmd_name)
        return command


# Every subcommand: name -> "module:attribute" of its click command.
COMMANDS = {
    "agent-server": ".agents:agent_server",
    "apply": ".steps:apply",
    "approve": ".recover:approve",
    "begin": ".steps:begin",
    "checkpoint": ".checkpoints:checkpoint_",
    "claim": ".claims:claim",
    "completion": ".completion:completion",
    "compact": ".checkpoints:compact",
    "doctor": ".doctor:doctor_",
    "drop": ".checkpoints:drop_",
    "exec": ".steps:exec_",
    "fetch": ".remote:fetch_",
    "gate": ".checkpoints:gate",
    "help": ".help:help_",
    "hook": ".agents:hook",
    "hooks": ".hooks:hooks",
    "install": ".agents:install_",
    "keygen": ".keys:keygen",
    "log": ".inspect:log",
    "mcp": ".mcp:mcp_",
    "mcp-config": ".mcp:mcp_config",
    "order": ".order:order_",
    "prompt": ".recover:prompt",
    "push": ".remote:push_",
    "recover": ".recover:recover",
    "redo": ".undo:redo_",
    "release": ".claims:release",
    "remote": ".remote:remote_",
    "repair": ".repair:repair",
    "resolve": ".recover:resolve",
    "runs": ".inspect:runs",
    "seal": ".seal:seal",
    "show": ".show:show",
    "status": ".inspect:status",
    "trust": ".keys:trust_",
    "undo": ".undo:undo_",
    "uninstall": ".agents:uninstall_",
    "verify": ".verify:verify_",
}


@click.group(cls=WalGroup, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]},
             epilog="`git wal help COMMAND` or `git wal COMMAND -h` shows a command's help; "
                    "`git wal --help` opens the manual page, git-wal(1).")
@click.version_option(package_name="gitwal")
def main() -> None:
    """A write-ahead log for coding agents, kept in git (refs/wal/<run>)."""
    from ..base import progress
    from ..base.repository import bound_memory

    bound_memory()
    progress.enable()  # a status line for long work, on a terminal only


__all__ = ["COMMANDS", "commands_to_stderr", "emit_json", "fail", "handled", "main"]
