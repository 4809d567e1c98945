"""What MCP expects of a server beyond calling tools, on the SDK's ``MCPServer``.

* every tool lists an ``outputSchema`` (schemas.py), which its structured
  content always matches, refusals included;
* arguments that do not match a tool's input schema come back as a tool error
  in gitwal's error shape (``kind: UsageError``, ``exit_code`` 2), not as the
  validator's raw text;
* the resume prompt (``resume``: what `git wal prompt` prints) and each run's
  status and log as resources, listed for the runs that exist when asked.

Only public ``MCPServer`` methods are overridden (``list_tools``,
``call_tool``, ``list_resources``); the SDK's request handlers call them.
No ``from __future__ import annotations``: the SDK reads the prompt's and the
resource templates' signatures at run time.
"""

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    InputRequiredResult,
    Resource,
    TextContent,
    Tool,
)
from pydantic import Field, ValidationError

from .. import documents
from ..base.errors import EXIT_USAGE, UnknownRun, WalError
from .host import Host
from .schemas import output_schema

T = TypeVar("T")

STATUS_URI = "gitwal://run/{run}/status"
LOG_URI = "gitwal://run/{run}/log"
JSON = "application/json"
JSONL = "application/jsonl"


def usage_error(message: str, hint: str) -> CallToolResult:
    """A call the server cannot make sense of, as the CLI reports a usage error."""
    data = documents.error(message, hint, "UsageError", EXIT_USAGE)
    return CallToolResult(content=[TextContent(type="text", text=f"error: {message}\n"
                                               f"hint: {hint}")],
                          structured_content=data, is_error=True)


def _argument_problems(error: ValidationError) -> str:
    """Pydantic's findings, one short clause per argument, without the values."""
    found = []
    for e in error.errors():
        where = ".".join(str(part) for part in e["loc"]) or "arguments"
        found.append(f"{where}: {e['msg']}")
    return "; ".join(found)


def protocol_error(e: WalError) -> MCPError:
    """A refused prompt or resource read: a JSON-RPC error whose data is the
    error document (docs/json.md, "Errors")."""
    code = INVALID_PARAMS if isinstance(e, UnknownRun) else INTERNAL_ERROR
    text = f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else "")
    return MCPError(code, text, documents.wal_error(e))


def _reading(work: Callable[[], T]) -> T:
    try:
        return work()
    except WalError as e:
        raise protocol_error(e) from None


class GitwalServer(MCPServer[Any]):
    """``MCPServer`` with gitwal's output schemas, argument errors and run resources."""

    def __init__(self, host: Host, **options: Any) -> None:
        super().__init__(**options)
        self.host = host
        self._register_prompt_and_resources()

    async def list_tools(self) -> list[Tool]:
        # The SDK derives an outputSchema only from a return annotation; ours come
        # from the documents' JSON Schema, so they are set on the listed tools.
        return [t.model_copy(update={"output_schema": output_schema(t.name)})
                for t in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e, UnexpectedToolError):
                raise  # a crash: the SDK reports it without its text
            if isinstance(e.__cause__, ValidationError):
                return await self._bad_arguments(name, e.__cause__)
            tools = sorted(t.name for t in await super().list_tools())
            if name not in tools:
                return usage_error(f"unknown tool {name!r}", f"the tools are: {', '.join(tools)}")
            raise

    async def _bad_arguments(self, name: str, error: ValidationError) -> CallToolResult:
        schema = next((t.input_schema for t in await super().list_tools() if t.name == name), {})
        required = schema.get("required", [])
        accepted = sorted(schema.get("properties", {}))
        hint = (f"{name} requires {', '.join(required)}" if required
                else f"{name} has no required argument")
        hint += f"; it accepts {', '.join(accepted)}" if accepted else "; it takes no argument"
        return usage_error(f"{name}: invalid arguments: {_argument_problems(error)}", hint)

    async def list_resources(self) -> list[Resource]:
        # Runs come and go while the server runs: the list is made when asked.
        runs = await _in_thread(self.host.run_ids)
        out = []
        for run in runs:
            out.append(Resource(uri=STATUS_URI.format(run=run), name=f"{run} status",
                                title=f"Status of run {run}", mime_type=JSON,
                                description="The run's `git wal status --json` document."))
            out.append(Resource(uri=LOG_URI.format(run=run), name=f"{run} log",
                                title=f"Log of run {run}", mime_type=JSONL,
                                description="The run's records as `git wal log --json` prints "
                                            "them: one JSON document a line, oldest first."))
        return out

    def _register_prompt_and_resources(self) -> None:
        host = self.host

        @self.prompt(name="resume", title="Resume after a crash",
                     description="What `git wal prompt` prints: which steps of the run are "
                                 "committed (do not redo them), what each open intent is, "
                                 "and the next action. Read-only: it decides nothing; the "
                                 "`recover` tool decides.")
        def resume(run: Annotated[str | None, Field(
                description="The run; default: the run this server works on (docs/mcp.md, "
                            "\"Which run\").")] = None) -> str:
            return _reading(lambda: host.resume_prompt(run))

        @self.resource(STATUS_URI, name="run status", title="Status of a run", mime_type=JSON,
                       description="`git wal status --run RUN --json`.")
        def status(run: str) -> str:
            return _reading(lambda: host.status_json(run))

        @self.resource(LOG_URI, name="run log", title="Log of a run", mime_type=JSONL,
                       description="`git wal log --run RUN --json`: one record a line.")
        def log(run: str) -> str:
            return _reading(lambda: host.log_jsonl(run))


async def _in_thread(work: Callable[[], T]) -> T:
    """Host calls block (they wait for the call in progress): off the event loop."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(lambda: _reading(work))
