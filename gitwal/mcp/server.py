"""The MCP server: gitwal's tools registered with the SDK's ``MCPServer``, over stdio.

Each tool is a thin function: the SDK validates the arguments against the
schema it derives from the signature, the :class:`~gitwal.mcp.host.Host`
does the work, and the reply becomes a ``CallToolResult`` with a short text,
the same facts as ``structuredContent``, and ``isError`` for a refusal. The
descriptions are what the model reads to choose a tool: they state each
tool's exact end state and why it beats an unlogged shell edit. The file
tools are in file_tools.py; the command, run and recovery tools are here.

No ``from __future__ import annotations`` here: the SDK reads the tool
signatures at run time, and the argument types below are module globals.
"""

from typing import Annotated

import anyio
from mcp.types import CallToolResult
from pydantic import Field

from ..base.version import VERSION
from .capture import isolate_stderr
from .conventions import GitwalServer
from .file_tools import register_file_tools
from .host import Host
from .registration import CheckArg, StepArg, registrar, tool_result

INSTRUCTIONS = """\
gitwal's tools change files in this git repository through a write-ahead log kept in git \
(refs/wal/<run>). Use them instead of sed -i, echo >>, cat <<EOF > file, mv, rm or an \
unlogged editor for every change to the working tree: each call logs an intent (tool, \
arguments, the file's hash before and the hash it must have after) before touching the \
file, writes atomically, verifies the hash (and your optional `check` command), and logs \
a commit. If this session dies mid-change, `recover` decides from the hashes whether the \
change landed, restores torn files, and says exactly which steps are done and what to do \
next. File tools describe an end state, so calling one again is harmless. Paths are \
relative to the top of the working tree. At the start of a session call `status`; if it \
shows an open intent, call `recover` before anything else. Read-only commands (ls, grep, \
cat, read-only test runs) need no logging; run commands that change files with `exec`."""


def build(host: Host) -> GitwalServer:
    """The server with every tool registered against ``host``: the file tools
    (file_tools.py), then those below."""
    server = GitwalServer(host, name="gitwal", version=VERSION, instructions=INSTRUCTIONS,
                          log_level="WARNING")
    register_file_tools(server, host)
    tool = registrar(server)

    @tool("Run a command as a logged step", read_only=False, destructive=True,
          idempotent=False, open_world=True)
    def exec(  # the tool's name in the protocol
        argv: Annotated[list[str], Field(
            min_length=1,
            description="The command and its arguments, run without a shell; for pipes or "
                        "redirections pass [\"sh\", \"-c\", \"...\"].")],
        idempotent: Annotated[bool, Field(
            description="True only if running the command twice is harmless; then "
                        "`recover` with redo=true may run it again after a crash.")] = False,
        step: StepArg = None,
        check: CheckArg = None,
    ) -> CallToolResult:
        """Run a command that changes the working tree when its effect cannot be known in
        advance: code generators, formatters, package installs, builds, migrations. It
        runs at the top of the tree with empty stdin and GITWAL_RUN, GITWAL_LSN and
        GITWAL_KEY (an idempotency key for external services) in its environment.

        gitwal snapshots the whole tree (tracked and untracked files, not ignored ones)
        into the log before the command runs and again after; the step commits only if
        the command exits 0 and `check` passes. Otherwise every path it changed is put
        back, an abort is logged, and the call fails with the output. The result lists
        the changed paths and the last 8000 characters of stdout and stderr. If the
        session dies mid-command, `recover` finds the step in doubt and lists what it
        changed; `recover` with restore=true puts those paths back. When you know the end
        state of a file, use the file tools instead. Read-only commands (grep, ls, a test
        run that writes nothing) need no logging."""
        return tool_result(host.exec(argv, idempotent=idempotent, check=check, step=step))

    # Adds a log (a ref) and names it current; the tree is untouched.
    @tool("Start a run with a plan", read_only=False, destructive=False, idempotent=False,
          open_world=False)
    def begin(
        task: Annotated[str, Field(description="What this run is for, in one sentence.")],
        steps: Annotated[list[str], Field(
            description="Intended steps, in order; change tools name the one they carry "
                        "out with `step` (1-based).")] = [],  # noqa: B006  (schema default)
        run_id: Annotated[str | None, Field(
            description="Choose the run id yourself (letters, digits, '.', '_', '-'); "
                        "default: a fresh time-based id.")] = None,
    ) -> CallToolResult:
        """Start a new run: a log for one task, with its plan. It becomes the worktree's
        current run and the run every later call of this server works on. Optional:
        without it, changes go to the worktree's current run, or the first change begins
        one. With a plan, the resume prompt after a crash lists exactly which steps are
        done and which remain."""
        return tool_result(host.begin(task, steps, run_id))

    @tool("Where the run stands", read_only=True, destructive=False, idempotent=True,
          open_world=False)
    def status() -> CallToolResult:
        """Read-only: the run's committed, aborted and open intents and the next LSN
        (counted after the newest checkpoint). Call it when a session starts: an open
        intent means an earlier session died mid-step; then every change is refused until
        you call `recover`."""
        return tool_result(host.status())

    # Destructive: it restores torn files and (restore=true) an exec step's paths.
    # Open world: redo=true may run an idempotent exec step's command again.
    @tool("Recover after a crash", read_only=False, destructive=True, idempotent=True,
          open_world=True)
    def recover(
        redo: Annotated[bool, Field(
            description="Redo file steps that did not land (and exec steps declared "
                        "idempotent) instead of only reporting them.")] = False,
        restore: Annotated[bool, Field(
            description="Put the paths an in-doubt exec step changed back to their "
                        "content before it, and close the step as aborted.")] = False,
    ) -> CallToolResult:
        """Decide every step a crash left open, repair the tree, and return the resume
        prompt: which steps are committed (do not redo them), what was found for each open
        step (landed, not applied, torn and restored) and exactly one next action. Safe
        to call at any time and again; with nothing open it only reports. A file step is
        decided from hashes alone. An exec step that changed files is in doubt: the result
        has in_doubt=true and lists the changed paths, and the step stays open until you
        call `recover` again with restore=true (or keep its effect by hand)."""
        return tool_result(host.recover(redo=redo, restore=restore))

    # Destructive: it rewrites files back to what they held; refused (nothing written)
    # where a later step or someone else's edit is in the way.
    @tool("Undo committed steps (logged)", read_only=False, destructive=True,
          idempotent=False, open_world=False)
    def undo(
        lsns: Annotated[list[int] | None, Field(
            description="The LSNs of the steps to undo (from `status` or the log). "
                        "Default: the newest step still in effect.")] = None,
        to: Annotated[int | None, Field(
            ge=0, description="Undo every step after this LSN instead.")] = None,
        last: Annotated[int | None, Field(
            ge=1, description="Undo the newest N steps instead.")] = None,
        dry_run: Annotated[bool, Field(
            description="Only return the change as a unified diff; write nothing.")] = False,
        run: Annotated[str | None, Field(
            description="The run whose steps to undo (default: this server's run). An "
                        "agent session's own edits are logged by its hooks in its own run, "
                        "named in gitwal's note at the session's start (claude-<session "
                        "id>).")] = None,
        turn: Annotated[int | None, Field(
            description="Undo what the agent did for its Nth prompt instead (1: the "
                        "first, -1: the latest).")] = None,
    ) -> CallToolResult:
        """Take back committed steps, file and shell steps alike: every path they changed
        goes back to its content (and mode) before the earliest of them. The undo is
        itself a logged step; a person can take it back with `git wal redo`. Refused,
        naming the paths and writing nothing, when a step left in place changed a path
        later or a path no longer holds what the log says (someone edited it): tell the
        user, who can decide (`git wal undo --force` keeps their bytes in the log)."""
        return tool_result(host.undo(lsns or (), to, last, dry_run, run, turn))

    # Only adds a commit (and a checkpoint record); refused when it would take in
    # changes no step explains, unless asked to.
    @tool("Checkpoint: commit what the log explains", read_only=False, destructive=False,
          idempotent=False, open_world=False)
    def checkpoint(
        message: Annotated[str | None, Field(
            description="Commit message (trailers Wal-Run and Wal-Lsn are added); "
                        "default: 'wal checkpoint: <task>'.")] = None,
        check: Annotated[str | None, Field(
            description="Command (sh -c) that must exit 0 before the commit is "
                        "made.")] = None,
        detached: Annotated[bool, Field(
            description="Keep the commit under refs/wal-checkpoints/ and leave the "
                        "branch, index and working tree alone.")] = False,
        include_unlogged: Annotated[bool, Field(
            description="Also commit changes no logged step explains, and record "
                        "their paths.")] = False,
    ) -> CallToolResult:
        """Commit exactly the working tree the log explains as an ordinary git commit on
        the current branch (hooks and signing apply) and log a checkpoint record; status
        and recover then read only what came after it. Refused while a step is open, and
        when files changed that no logged step explains (unless include_unlogged=true).
        Do it after a group of verified steps, and before compacting your context."""
        return tool_result(host.checkpoint(message, check, detached, include_unlogged))

    return server


def serve(host: Host) -> None:
    """Serve ``host``'s tools over stdin/stdout until the client closes stdin."""
    isolate_stderr()  # before the SDK sets up logging on sys.stderr
    server = build(host)
    anyio.run(server.run_stdio_async)
