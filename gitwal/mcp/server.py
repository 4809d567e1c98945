"""The MCP server: gitwal's tools registered with the SDK's ``MCPServer``, over stdio.

Each tool is a thin function: the SDK validates the arguments against the
schema it derives from the signature, the :class:`~gitwal.mcp.host.Host`
does the work, and the reply becomes a ``CallToolResult`` with a short text,
the same facts as ``structuredContent``, and ``isError`` for a refusal. The
descriptions are what the model reads to choose a tool: they state each
tool's exact end state and why it beats an unlogged shell edit.

No ``from __future__ import annotations`` here: the SDK reads the tool
signatures at run time, and the argument types below are module globals.
"""

import inspect
from collections.abc import Callable
from typing import Annotated, Literal

import anyio
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ..base.version import VERSION
from .capture import isolate_stderr
from .conventions import GitwalServer
from .host import Host
from .replies import Reply

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

PathArg = Annotated[str, Field(
    description="Path relative to the top of the working tree, '/'-separated. Absolute "
                "paths, '..', anything under .git and paths through a symlink that leaves "
                "the tree are refused.")]
StepArg = Annotated[int | None, Field(
    ge=1, description="The plan step (1-based, as given to `begin`) this change carries "
                      "out. Optional; it lets the resume prompt after a crash list exactly "
                      "the steps that remain.")]
CheckArg = Annotated[str | None, Field(
    description="Optional verification command, run with `sh -c` at the top of the tree "
                "after the change (e.g. `python -m pytest -q tests/test_x.py`, `npx tsc "
                "--noEmit`). The step commits only if it exits 0; otherwise the change is "
                "undone, an abort is logged, and the call fails with the command's output.")]


def _result(reply: Reply) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=reply.text)],
                          structured_content=reply.data, is_error=not reply.ok)


def build(host: Host) -> GitwalServer:
    """The server with every tool registered against ``host``."""
    server = GitwalServer(host, name="gitwal", version=VERSION, instructions=INSTRUCTIONS,
                          log_level="WARNING")

    # The hints (docs/mcp.md, "Tools"), judged on the working tree, not the log
    # (every call that changes something appends records): destructive = may
    # replace or remove content already there; idempotent = the same call again
    # leaves the tree as the first left it (a refusal changes nothing); open
    # world = runs a command whose effects gitwal cannot know in advance.
    def tool(title: str, *, read_only: bool, destructive: bool, idempotent: bool,
             open_world: bool
             ) -> Callable[[Callable[..., CallToolResult]], Callable[..., CallToolResult]]:
        def register(fn: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
            server.add_tool(fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                            annotations=ToolAnnotations(
                                title=title, read_only_hint=read_only,
                                destructive_hint=destructive, idempotent_hint=idempotent,
                                open_world_hint=open_world))
            return fn
        return register

    @tool("Write a file (logged, verified)", read_only=False, destructive=True,
          idempotent=True, open_world=False)
    def write_file(
        path: PathArg,
        content: Annotated[str, Field(description="The file's complete new content.")],
        encoding: Annotated[Literal["utf-8", "base64"], Field(
            description="How `content` is encoded: UTF-8 text, or base64 for binary files."
        )] = "utf-8",
        step: StepArg = None,
        check: CheckArg = None,
    ) -> CallToolResult:
        """Set a file to exactly `content`: create it, or replace it whole (parent
        directories are created). End state: calling it again with the same content
        changes nothing and succeeds.

        Before the file is touched, gitwal logs an intent holding the previous content
        and the hash the file must have afterwards; it then writes atomically (temp file,
        fsync, rename), checks the hash, runs `check`, and logs a commit. If anything dies
        half-way, `recover` can tell whether the write landed and restores the previous
        content of a torn file. Prefer it to `cat > file <<EOF`, `echo > file` or `tee`:
        those leave no record, are not verified, and a crash mid-write leaves a torn file.
        Returns the intent's LSN, the post-image hash and what was verified."""
        return _result(host.write_file(path, content, encoding, check, step))

    @tool("Rename an identifier in a file (logged, verified)", read_only=False,
          destructive=True, idempotent=True, open_world=False)
    def replace_symbol(
        path: PathArg,
        old: Annotated[str, Field(description="The identifier to rename "
                                              "([A-Za-z_$][A-Za-z0-9_$]*).")],
        new: Annotated[str, Field(description="Its new name (an identifier too).")],
        step: StepArg = None,
        check: CheckArg = None,
    ) -> CallToolResult:
        """Rename an identifier in one UTF-8 text file: every occurrence of `old` that is
        a whole identifier (not preceded or followed by a letter, digit, `_` or `$`)
        becomes `new`; `getUserById` never matches inside `getUserByIdx`. End state:
        once no whole-word `old` is left, calling it again changes nothing and succeeds
        (the result then says "no change").

        Logged, applied atomically and verified like every gitwal tool, and recoverable
        after a crash. Prefer it to `sed -i 's/old/new/g'`, which also rewrites
        substrings and leaves no record of what the file held before. For anything that
        is not a single identifier, use `replace_text`."""
        return _result(host.apply("replace_symbol", check=check, step=step, path=path,
                                  old=old, new=new))

    # Not idempotent: when `new` contains `old` once, a second call replaces again.
    @tool("Replace one exact text (logged, verified)", read_only=False, destructive=True,
          idempotent=False, open_world=False)
    def replace_text(
        path: PathArg,
        old: Annotated[str, Field(description="Exact text to replace; it must occur "
                                              "exactly once in the file.")],
        new: Annotated[str, Field(description="The exact replacement text.")],
        step: StepArg = None,
        check: CheckArg = None,
    ) -> CallToolResult:
        """Replace the single occurrence of `old` in a UTF-8 text file with `new`. Exact
        text, not a pattern: whitespace, indentation and newlines must match. If `old`
        occurs 0 times or 2+ times (overlaps counted), the call is refused before
        anything is logged or written; include more surrounding lines to make it unique.

        After it committed, calling it again is refused (the old text is gone): that
        refusal means the change is already there. Logged, applied atomically, verified
        and recoverable after a crash. Prefer it to `sed` or a hand-rolled
        read-modify-write, which can match the wrong place or several places silently."""
        return _result(host.apply("replace_text", check=check, step=step, path=path,
                                  old=old, new=new))

    # Only ever adds a line (or creates the file): nothing there is replaced.
    @tool("Ensure a file contains a line (logged, verified)", read_only=False,
          destructive=False, idempotent=True, open_world=False)
    def ensure_line(
        path: PathArg,
        line: Annotated[str, Field(description="The line, without a line break.")],
        step: StepArg = None,
        check: CheckArg = None,
    ) -> CallToolResult:
        """Make sure a file contains `line`. If some line of the file (without its `\\n`
        or `\\r\\n`) equals `line` exactly, nothing changes. Otherwise `line` is appended,
        ended with the file's own line ending (`\\r\\n` if the file has any, else `\\n`),
        after ending an unterminated last line. A missing file is created holding that
        line. End state: adds the line only if absent, so calling it again is harmless.

        Use it for .gitignore entries, config keys, requirement lines. Prefer it to
        `echo line >> file`, which appends a duplicate every time it is re-run (after a
        crash and a retry, for instance). Logged, verified and recoverable."""
        return _result(host.apply("ensure_line", check=check, step=step, path=path,
                                  line=line))

    # Idempotent: once the file is gone, the same call is refused and changes nothing.
    @tool("Delete a file (logged, restorable)", read_only=False, destructive=True,
          idempotent=True, open_world=False)
    def delete_file(path: PathArg, step: StepArg = None,
                    check: CheckArg = None) -> CallToolResult:
        """Delete one file. It must exist: deleting a missing file is refused (nothing to
        do). The previous content stays in the log, so an aborted step (a failing
        `check`) or recovery after a crash restores it exactly, mode included. Prefer it
        to `rm`, which leaves nothing to restore from."""
        return _result(host.apply("delete_file", check=check, step=step, path=path))

    # Idempotent: once moved, `src` is gone and the same call is refused.
    @tool("Move or rename a file (logged, verified)", read_only=False, destructive=True,
          idempotent=True, open_world=False)
    def move_file(
        src: Annotated[str, Field(description="Existing file, relative to the top of the "
                                              "working tree.")],
        dst: Annotated[str, Field(description="New path; must not exist (delete it first "
                                              "to replace it). Parent directories are "
                                              "created.")],
        step: StepArg = None,
        check: CheckArg = None,
    ) -> CallToolResult:
        """Move one file from `src` to `dst` with its content and mode. `src` must exist
        and `dst` must not; otherwise the call is refused before anything is logged.
        The destination is written before the source is removed, so a crash never loses
        the content, and recovery finishes or undoes a half-done move. Prefer it to `mv`
        or `git mv`, which leave no record to recover from."""
        return _result(host.apply("move_file", check=check, step=step, src=src, dst=dst))

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
        return _result(host.exec(argv, idempotent=idempotent, check=check, step=step))

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
        return _result(host.begin(task, steps, run_id))

    @tool("Where the run stands", read_only=True, destructive=False, idempotent=True,
          open_world=False)
    def status() -> CallToolResult:
        """Read-only: the run's committed, aborted and open intents and the next LSN
        (counted after the newest checkpoint). Call it when a session starts: an open
        intent means an earlier session died mid-step; then every change is refused until
        you call `recover`."""
        return _result(host.status())

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
        return _result(host.recover(redo=redo, restore=restore))

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
        return _result(host.undo(lsns or (), to, last, dry_run, run, turn))

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
        return _result(host.checkpoint(message, check, detached, include_unlogged))

    return server


def serve(host: Host) -> None:
    """Serve ``host``'s tools over stdin/stdout until the client closes stdin."""
    isolate_stderr()  # before the SDK sets up logging on sys.stderr
    server = build(host)
    anyio.run(server.run_stdio_async)
