"""Post-images of an agent's file tools, computed before the tool runs.

Each function maps the file's current content (``None``: absent) and the
tool's input to the content the tool will leave, or raises
:class:`ToolRefused` when the tool itself would refuse (old text absent or
ambiguous): then nothing is logged and the agent reports its own error.

They follow the agents' documented behaviour; where an agent does more (e.g.
normalising quotes to find the old text), the prediction misses and the
closing hook records what it observed (docs/agents.md, "prediction misses").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.errors import ToolRefused

Content = bytes | None


def _text(data: Content, path: str, tool: str) -> str:
    if data is None:
        raise ToolRefused(f"{tool}: {path} does not exist")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolRefused(f"{tool}: {path} is not UTF-8 text") from None


def _str(value: Any, name: str, tool: str) -> str:
    if not isinstance(value, str):
        raise ToolRefused(f"{tool}: {name} must be a string")
    return value


def replace(text: str, old: str, new: str, replace_all: bool, path: str, tool: str) -> str:
    """One string replacement as Claude Code's Edit does it."""
    if old == new:
        raise ToolRefused(f"{tool}: old_string and new_string are the same")
    count = text.count(old)
    if count == 0:
        raise ToolRefused(f"{tool}: old_string not found in {path}")
    if count > 1 and not replace_all:
        raise ToolRefused(f"{tool}: old_string occurs {count} times in {path}; "
                          "it must be unique unless replace_all is set")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def _edits(pre: Content, edits: Sequence[Mapping[str, Any]], path: str, tool: str) -> bytes:
    """Edits applied in order; an empty first old_string creates the file."""
    if not edits:
        raise ToolRefused(f"{tool}: no edits")
    first_old = _str(edits[0].get("old_string"), "old_string", tool)
    if first_old == "" and (pre is None or pre == b""):
        text = ""
        creating = True
    else:
        text = _text(pre, path, tool)
        creating = False
    # The agent edits text with \n line ends and writes the file's own back.
    crlf = "\r\n" in text
    if crlf:
        text = text.replace("\r\n", "\n")
    for n, e in enumerate(edits):
        old = _str(e.get("old_string"), "old_string", tool)
        new = _str(e.get("new_string"), "new_string", tool)
        if n == 0 and creating:
            text = new
            continue
        if old == "":
            raise ToolRefused(f"{tool}: an empty old_string only creates a new file")
        text = replace(text, old, new, bool(e.get("replace_all", False)), path, tool)
    if crlf:
        text = text.replace("\n", "\r\n")
    return text.encode("utf-8")


def edit(pre: Content, tool_input: Mapping[str, Any], path: str) -> Content:
    """Claude Code ``Edit``: old_string -> new_string (all of them with replace_all)."""
    return _edits(pre, [tool_input], path, "Edit")


def multi_edit(pre: Content, tool_input: Mapping[str, Any], path: str) -> Content:
    """Claude Code ``MultiEdit``: ``edits`` in order, each on the previous result."""
    edits = tool_input.get("edits")
    if not isinstance(edits, list) or not all(isinstance(e, dict) for e in edits):
        raise ToolRefused("MultiEdit: edits must be a list of objects")
    return _edits(pre, edits, path, "MultiEdit")


def write(pre: Content, tool_input: Mapping[str, Any], path: str) -> Content:
    """Claude Code ``Write``: the file holds ``content`` afterwards."""
    return _str(tool_input.get("content"), "content", "Write").encode("utf-8")


def notebook_edit(pre: Content, tool_input: Mapping[str, Any], path: str) -> Content:
    """Claude Code ``NotebookEdit``: replace, insert or delete one cell.

    The notebook is re-serialised the way the agent writes it (one-space
    indentation); a notebook that does not parse is refused, as the agent
    refuses it.
    """
    tool = "NotebookEdit"
    try:
        nb = json.loads(_text(pre, path, tool))
    except ValueError:
        raise ToolRefused(f"{tool}: {path} is not a notebook (invalid JSON)") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ToolRefused(f"{tool}: {path} has no cells")
    mode = tool_input.get("edit_mode") or "replace"
    cell_id = tool_input.get("cell_id")
    index = 0
    if cell_id is not None:
        ids = [c.get("id") if isinstance(c, dict) else None for c in cells]
        if cell_id in ids:
            index = ids.index(cell_id)
        elif isinstance(cell_id, str) and cell_id.startswith("cell-") and \
                cell_id[5:].isdigit():
            index = int(cell_id[5:])
        else:
            raise ToolRefused(f"{tool}: no cell {cell_id!r} in {path}")
    source = tool_input.get("new_source", "")
    if mode == "delete":
        if not 0 <= index < len(cells):
            raise ToolRefused(f"{tool}: no cell at {index} in {path}")
        del cells[index]
    elif mode == "insert":
        kind = tool_input.get("cell_type") or "code"
        cell: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.insert(index + 1 if cell_id is not None else 0, cell)
    elif mode == "replace":
        if not 0 <= index < len(cells) or not isinstance(cells[index], dict):
            raise ToolRefused(f"{tool}: no cell at {index} in {path}")
        target = cells[index]
        target["source"] = source
        if tool_input.get("cell_type"):
            target["cell_type"] = tool_input["cell_type"]
        if target.get("cell_type") == "code":
            target["execution_count"] = None
            target["outputs"] = []
    else:
        raise ToolRefused(f"{tool}: unknown edit_mode {mode!r}")
    return json.dumps(nb, indent=1, ensure_ascii=False).encode("utf-8")
