"""`git wal mcp`: gitwal's end-state tools served over the Model Context Protocol.

``host`` does the work without the MCP SDK (run selection, one step at a
time), with ``replies`` (results and refusals as data), ``capture`` (a
command's output, kept off the protocol's streams) and ``guard`` (the `exec`
calls the model may not make). ``server`` wires it to the SDK, with
``registration`` (tool hints, shared arguments, replies as results) and
``file_tools`` (the file tools); ``conventions`` adds what MCP expects beyond
tools (output schemas, from ``schemas``/``output_schemas``; argument errors;
the resume prompt; run resources). Only ``server``, ``file_tools``,
``registration`` and ``conventions`` import the SDK, and only `git wal mcp`
imports them, so gitwal works where the optional ``mcp`` extra is not
installed.
"""
