"""What registering a tool with the SDK takes: its hints as ``ToolAnnotations``,
the arguments several tools share (with the descriptions the model reads), and
the host's :class:`~gitwal.mcp.replies.Reply` as a ``CallToolResult``.

No ``from __future__ import annotations``: the SDK reads the tool signatures
at run time, and the argument types below are module globals.
"""

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from .replies import Reply

ToolFunction = Callable[..., CallToolResult]
Registrar = Callable[..., Callable[[ToolFunction], ToolFunction]]

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


def tool_result(reply: Reply) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=reply.text)],
                          structured_content=reply.data, is_error=not reply.ok)


# The hints (docs/mcp.md, "Tools"), judged on the working tree, not the log
# (every call that changes something appends records): destructive = may
# replace or remove content already there; idempotent = the same call again
# leaves the tree as the first left it (a refusal changes nothing); open
# world = runs a command whose effects gitwal cannot know in advance.
def registrar(server: MCPServer[Any]) -> Registrar:
    """``server``'s decorator ``@tool(title, read_only=..., destructive=...,
    idempotent=..., open_world=...)``: the function becomes a tool of its name,
    its docstring the description the model reads."""
    def tool(title: str, *, read_only: bool, destructive: bool, idempotent: bool,
             open_world: bool
             ) -> Callable[[ToolFunction], ToolFunction]:
        def register(fn: ToolFunction) -> ToolFunction:
            server.add_tool(fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                            annotations=ToolAnnotations(
                                title=title, read_only_hint=read_only,
                                destructive_hint=destructive, idempotent_hint=idempotent,
                                open_world_hint=open_world))
            return fn
        return register
    return tool
