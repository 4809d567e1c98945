"""`git wal mcp`: gitwal's end-state tools served over the Model Context Protocol.

``host`` does the work without the MCP SDK (run selection, one step at a
time, results and refusals as data); ``server`` wires it to the SDK. Only
``server`` imports the SDK, and only `git wal mcp` imports ``server``, so
gitwal works where the optional ``mcp`` extra is not installed.
"""
