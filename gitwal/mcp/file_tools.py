"""The file tools, each a logged, verified step towards one file's stated end
state: write_file, replace_symbol, replace_text, ensure_line, delete_file,
move_file. Their descriptions say why each beats an unlogged shell edit.

No ``from __future__ import annotations``: the SDK reads the tool signatures
at run time.
"""

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from .host import Host
from .registration import CheckArg, PathArg, StepArg, registrar, tool_result


def register_file_tools(server: MCPServer[Any], host: Host) -> None:
    """Register the file tools against ``host``, in the order they are listed."""
    tool = registrar(server)

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
        return tool_result(host.write_file(path, content, encoding, check, step))

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
        return tool_result(host.apply("replace_symbol", check=check, step=step, path=path,
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
        return tool_result(host.apply("replace_text", check=check, step=step, path=path,
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
        return tool_result(host.apply("ensure_line", check=check, step=step, path=path,
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
        return tool_result(host.apply("delete_file", check=check, step=step, path=path))

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
        return tool_result(host.apply("move_file", check=check, step=step, src=src, dst=dst))
