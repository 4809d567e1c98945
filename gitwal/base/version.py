"""The version of gitwal (the MCP server and `--version` report it)."""

VERSION = "0.1.0"
