"""`git wal mcp`: gitwal's end-state tools served over the Model Context Protocol.

``host`` does the work without the MCP SDK (run selection, one step at a
time, results and refusals as data); ``server`` wires it to the SDK, and
``conventions`` adds what MCP expects beyond tools (output schemas, from
``schemas``/``output_schemas``; argument errors; the resume prompt; run
resources). Only ``server`` and ``conventions`` import the SDK, and only
`git wal mcp` imports them, so gitwal works where the optional ``mcp`` extra
is not installed.
"""
