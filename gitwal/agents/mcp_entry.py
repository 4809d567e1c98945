"""The entry that registers `git wal mcp` with an MCP client.

Claude Code reads project-scoped servers from `.mcp.json` at the top of the
repository, Gemini CLI from its settings.json, both as
``{"mcpServers": {"<name>": {"command": ..., "args": [...]}}}``; Codex from a
config.toml, as ``[mcp_servers.<name>]`` with ``command`` and ``args``.
These functions add or remove gitwal's entry and leave every other key and
server as it was (a config.toml keeps its comments and layout: tomlkit edits
it in place). They never import the MCP SDK: writing a config file must work
where the SDK is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base.errors import WalError
from ..cloned import File, load_json, load_toml, text

SERVER_NAME = "gitwal"


class McpConfigError(WalError):
    """`.mcp.json` exists but is not a JSON object gitwal can edit safely."""


def mcp_server_entry() -> dict[str, object]:
    """gitwal's server entry: `git-wal mcp` over stdio, run from the project root.

    The server works on the repository it is started in; an MCP client starts
    project servers in the project directory, so no path is written here.
    """
    return {"command": "git-wal", "args": ["mcp"]}


def mcp_json_document() -> dict[str, object]:
    """A complete `.mcp.json` holding gitwal's entry alone (what `git wal mcp-config` prints)."""
    return {"mcpServers": {SERVER_NAME: mcp_server_entry()}}


def _file(where: File | Path) -> File:
    """A path a person named is theirs (links followed); the tree's files come
    as :class:`File` confined to it (cloned/)."""
    return where if isinstance(where, File) else File(where)


def _load(f: File) -> dict[str, Any] | None:
    """The parsed file, or None when it does not exist. Refuses what it cannot edit."""
    raw = f.read()
    if raw is None:
        return None
    path = f.path
    hint = f"fix {path} by hand (it must be a JSON object), then run the command again"
    source = text(raw, path)
    doc = load_json(source, path, "JSON", McpConfigError, hint) if source.strip() else {}
    if not isinstance(doc, dict):
        raise McpConfigError(f"{path} does not hold a JSON object", hint)
    servers = doc.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise McpConfigError(f"{path}: \"mcpServers\" is not a JSON object", hint)
    return doc


def _store(f: File, doc: dict[str, Any]) -> None:
    text_ = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    f.write(text_.encode("utf-8"))


def _runs_git_wal_mcp(entry: object) -> bool:
    """True for an entry that starts `git-wal mcp`, wherever git-wal lives and
    whatever options follow (a user's absolute path or `--task` is kept)."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args")
    return (isinstance(command, str) and Path(command).name == "git-wal"
            and isinstance(args, list) and args[:1] == ["mcp"])


def merge_mcp_json(path: File | Path) -> bool:
    """Add (or repair) gitwal's entry in ``path``; True if the file changed.

    Other servers and top-level keys are kept, in their order. A `gitwal`
    entry that already runs `git-wal mcp` is left exactly as it is; any other
    entry under that name gets gitwal's ``command`` and ``args`` and keeps its
    other keys (``env``, ...). Running it again changes nothing.
    """
    f = _file(path)
    doc = _load(f)
    if doc is None:
        doc = {}
    if not merge_into(doc):
        return False
    _store(f, doc)
    return True


def merge_into(doc: dict[str, Any]) -> bool:
    """Add (or repair) gitwal's entry in a parsed ``{"mcpServers": ...}`` document
    (Gemini CLI's settings, `.mcp.json`); True if it changed."""
    servers = doc.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise McpConfigError("\"mcpServers\" is not a JSON object",
                             "fix the file by hand, then run the command again")
    current = servers.get(SERVER_NAME)
    if _runs_git_wal_mcp(current):
        return False
    wanted: dict[str, Any] = dict(current) if isinstance(current, dict) else {}
    wanted.update(mcp_server_entry())
    servers[SERVER_NAME] = wanted
    return True


def remove_from(doc: dict[str, Any]) -> bool:
    """Remove gitwal's entry from a parsed document when it runs `git-wal mcp`
    (an entry of that name running something else is the user's); True if it
    changed. An ``mcpServers`` left empty goes too."""
    servers = doc.get("mcpServers")
    if not isinstance(servers, dict) or not _runs_git_wal_mcp(servers.get(SERVER_NAME)):
        return False
    del servers[SERVER_NAME]
    if not servers:
        del doc["mcpServers"]
    return True


def remove_from_mcp_json(path: File | Path) -> bool:
    """Remove gitwal's entry from ``path``; True if the file changed.

    Every other server and key stays. A file left holding nothing but an empty
    ``mcpServers`` object is deleted (it held only what gitwal added).
    """
    f = _file(path)
    doc = _load(f)
    if doc is None:
        return False
    servers = doc.get("mcpServers")
    if not isinstance(servers, dict) or SERVER_NAME not in servers:
        return False
    del servers[SERVER_NAME]
    if not servers and set(doc) == {"mcpServers"}:
        f.remove()
    else:
        _store(f, doc)
    return True


# -- Codex: config.toml ----------------------------------------------------------------


def _load_toml(f: File) -> Any:
    path = f.path
    hint = f"fix {path} by hand, then run the command again"
    doc = load_toml(text(f.read() or b"", path), path, McpConfigError, hint)
    servers = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise McpConfigError(f"{path}: mcp_servers is not a table", hint)
    return doc


def _store_toml(f: File, doc: Any) -> None:
    import tomlkit

    f.write(tomlkit.dumps(doc).encode("utf-8"))


def _plain(item: object) -> object:
    """A tomlkit item as plain Python values (tomlkit's own types otherwise)."""
    unwrap = getattr(item, "unwrap", None)
    return unwrap() if callable(unwrap) else item


def merge_codex_toml(path: File | Path) -> bool:
    """Add (or repair) ``[mcp_servers.gitwal]`` in Codex's ``path``; True if it
    changed. Comments, layout and every other table stay as they were; an
    entry that already runs `git-wal mcp` is left exactly as it is, another
    one under that name gets gitwal's ``command`` and ``args`` and keeps its
    other keys."""
    import tomlkit

    f = _file(path)
    doc = _load_toml(f)
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    current = servers.get(SERVER_NAME)
    if _runs_git_wal_mcp(_plain(current)):
        return False
    if isinstance(current, dict):
        for key, value in mcp_server_entry().items():
            current[key] = value
    else:
        table = tomlkit.table()
        for key, value in mcp_server_entry().items():
            table[key] = value
        servers[SERVER_NAME] = table
    _store_toml(f, doc)
    return True


def remove_from_codex_toml(path: File | Path) -> bool:
    """Remove ``[mcp_servers.gitwal]`` from ``path`` when it runs `git-wal mcp`;
    True if the file changed. Everything else stays, the file too."""
    f = _file(path)
    if not f.exists():
        return False
    doc = _load_toml(f)
    servers = doc.get("mcp_servers")
    current = servers.get(SERVER_NAME) if servers is not None else None
    if not _runs_git_wal_mcp(_plain(current)):
        return False
    del servers[SERVER_NAME]
    if not servers:
        del doc["mcp_servers"]
    _store_toml(f, doc)
    return True
