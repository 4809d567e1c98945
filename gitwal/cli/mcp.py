"""`git wal mcp` (the MCP server over stdio) and `git wal mcp-config`.

The MCP SDK is an optional extra: it is imported inside the `mcp` command
only, so every other command works without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..agents.mcp_entry import mcp_json_document, merge_mcp_json, remove_from_mcp_json
from ..base.errors import WalError
from ..cloned import File
from ..wal import Wal
from .failures import handled
from .options import JSON
from .stdout import emit_json

INSTALL_HINT = "pip install 'gitwal[mcp]'"


class SdkMissing(WalError):
    """The optional MCP SDK is not installed (or is not a version gitwal supports)."""


@click.command("mcp")
@click.option("--run", "run_id", metavar="ID",
              help="Work on this run (default: the worktree's current run).")
@click.option("--repo", "repo", metavar="PATH", default=".", show_default=True,
              help="The repository (any directory inside its working tree).")
@click.option("--task", metavar="TEXT",
              help="Task of the run begun by the first change when there is no run.")
@handled
def mcp_(run_id: str | None, repo: str, task: str | None) -> None:
    """Serve gitwal's tools to an MCP client over stdin/stdout."""
    try:
        from ..mcp import server
    except ImportError as e:
        raise SdkMissing(f"`git wal mcp` needs the MCP SDK (mcp>=2.3): {e}",
                         INSTALL_HINT) from None
    from ..mcp.host import Host

    server.serve(Host(repo, run_id, task))


@click.command("mcp-config")
@click.option("--merge", "action", flag_value="merge",
              help="Add gitwal's entry to the file (other servers are kept).")
@click.option("--remove", "action", flag_value="remove",
              help="Remove gitwal's entry from the file (other servers are kept).")
@click.option("--file", "path", metavar="PATH", type=click.Path(dir_okay=False, path_type=Path),
              help="The file to edit (default: .mcp.json at the top of the working tree).")
@JSON
@handled
def mcp_config(action: str | None, path: Path | None, as_json: bool) -> None:
    """Print the .mcp.json entry for `git wal mcp`, or merge it into / remove it from a file."""
    if action is None:
        click.echo(json.dumps(mcp_json_document(), indent=None if as_json else 2))
        return
    # The tree's .mcp.json may come with a clone: confined to the tree (cloned/);
    # a file named with --file is the user's own.
    where = File(path) if path is not None else File.in_tree(Wal(".").wt.root, ".mcp.json")
    path = where.path
    changed = merge_mcp_json(where) if action == "merge" else remove_from_mcp_json(where)
    if as_json:
        emit_json({"path": str(path), "action": action, "changed": changed})
    elif action == "merge":
        click.echo(f"{path}: {'added gitwal' if changed else 'gitwal already present'}")
    else:
        click.echo(f"{path}: {'removed gitwal' if changed else 'gitwal not present'}")
