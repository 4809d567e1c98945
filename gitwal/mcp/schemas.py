"""Each MCP tool's ``outputSchema``, cut from the one schema of gitwal's documents.

docs/json-schema/gitwal.schema.json is the single source (docs/json.md): the
tests validate the CLI's ``--json`` output and the server's structured content
against it. It is not in the wheel, so ``python -m gitwal.mcp.schemas`` copies
the ``$defs`` the server needs into ``output_schemas.py`` (generated, never
edited), and ``--check`` (``make lint``, and tests/test_mcp_conventions.py)
fails while that copy differs from what the schema file gives.

A tool's schema admits its success documents and ``mcp_error``: some clients
validate ``structuredContent`` even when ``isError`` is true, so a refusal
must match the declared schema as well as a success does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[2] / "docs" / "json-schema" / "gitwal.schema.json"
GENERATED = Path(__file__).resolve().parent / "output_schemas.py"

STEP_TOOLS = ("write_file", "replace_symbol", "replace_text", "ensure_line", "delete_file",
              "move_file", "exec")
# The documents (``$defs`` entries) a tool's successful result may be (docs/mcp.md).
TOOL_DOCUMENTS: dict[str, tuple[str, ...]] = {
    **{tool: ("mcp_step",) for tool in STEP_TOOLS},
    "begin": ("begin",),
    "status": ("status", "mcp_no_run"),
    "recover": ("mcp_recover", "mcp_no_run"),
    "checkpoint": ("mcp_checkpoint",),
    "undo": ("undo",),
}
ERROR = "mcp_error"  # every tool's refusal (isError: true)

HEADER = '''\
"""Generated file, do not edit: `python -m gitwal.mcp.schemas` writes it from
docs/json-schema/gitwal.schema.json (the ``$defs`` the MCP tools' output schemas
need), and `python -m gitwal.mcp.schemas --check` (`make lint`) fails while it is
stale. To change it, change the schema file and run the first command again."""

from typing import Any

DEFS: dict[str, Any] = '''


def _refs(node: Any) -> Iterable[str]:
    """The ``$defs`` names that ``node`` refers to (``#/$defs/NAME`` or below it)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/$defs/"):
                raise ValueError(f"only local $defs references are supported: {ref}")
            yield ref.split("/")[2]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def closure(defs: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``names`` and every entry they reach through ``$ref``, by name."""
    out: dict[str, Any] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out[name] = defs[name]
            todo.extend(_refs(defs[name]))
    return dict(sorted(out.items()))


def needed_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """What the server ships: every entry an MCP tool's output schema reaches."""
    documents = {d for docs in TOOL_DOCUMENTS.values() for d in docs} | {ERROR}
    return closure(schema["$defs"], sorted(documents))


def output_schema(tool: str, defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``tool``'s outputSchema: self-contained (its own ``$defs``), no ``$schema``
    key (MCP's default dialect is 2020-12; validators of older drafts refuse the
    2020-12 URI but read these keywords alike)."""
    if defs is None:
        from .output_schemas import DEFS

        defs = DEFS
    names = [*TOOL_DOCUMENTS[tool], ERROR]
    return {"type": "object", "anyOf": [{"$ref": f"#/$defs/{n}"} for n in names],
            "$defs": closure(defs, names)}


def _literal(value: Any, indent: str, used: int) -> str:
    """``value`` as Python source: containers one item a line, a long string split
    into adjacent literals; ``used``: columns already taken on the first line."""
    width = 96
    if isinstance(value, dict | list) and value and used + len(repr(value)) > width:
        inner = indent + "    "
        if isinstance(value, dict):
            items = []
            for k, v in value.items():
                head = f"{inner}{k!r}: "
                items.append(head + _literal(v, inner, len(head)))
            return "{\n" + ",\n".join(items) + ",\n" + indent + "}"
        return "[\n" + ",\n".join(inner + _literal(v, inner, len(inner)) for v in value) \
            + ",\n" + indent + "]"
    if isinstance(value, str) and used + len(repr(value)) > width:
        words = re.findall(r"\S*\s*", value)
        chunks = [""]
        for word in words:
            if chunks[-1] and len(indent) + len(repr(chunks[-1] + word)) > width - 4:
                chunks.append("")
            chunks[-1] += word
        inner = indent + "    "
        return "(\n" + "\n".join(inner + repr(c) for c in chunks if c) + "\n" + indent + ")"
    return repr(value)


def render(defs: dict[str, Any]) -> str:
    """The source of ``output_schemas.py``; every line fits ruff's 100 columns."""
    text = HEADER + _literal(defs, "", len("DEFS: dict[str, Any] = ")) + "\n"
    long = [line for line in text.splitlines() if len(line) > 100]
    if long:
        raise ValueError(f"generated line longer than 100 characters: {long[0]!r}")
    return text


def expected() -> str:
    return render(needed_defs(json.loads(SOURCE.read_text(encoding="utf-8"))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitwal.mcp.schemas",
                                     description="Write gitwal/mcp/output_schemas.py from "
                                                 "docs/json-schema/gitwal.schema.json.")
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args(argv)
    want = expected()
    if args.check:
        have = GENERATED.read_text(encoding="utf-8") if GENERATED.exists() else ""
        if have != want:
            print(f"error: {GENERATED} is stale\nhint: python -m gitwal.mcp.schemas",
                  file=sys.stderr)
            return 1
        return 0
    GENERATED.write_text(want, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
