"""`git wal mcp`: gitwal's end-state tools served over the Model Context Protocol.

Without the MCP SDK:
host.py            the work: run selection, one step at a time, each call under one lock
replies.py         a call's outcome as a Reply: text for the model, the same facts as data
capture.py         a command's output during a step, kept off the protocol's streams
guard.py           the `exec` calls the model may not make
schemas.py         cuts the output schemas from docs/json-schema (writes output_schemas.py)
output_schemas.py  generated: the `$defs` the tools' output schemas need

With the SDK (only `git wal mcp` imports these, so gitwal works where the
optional ``mcp`` extra is not installed):
server.py          the SDK binding: the instructions and the run tools
registration.py    tool hints, shared arguments, a Reply as a tool result
file_tools.py      the file tools (write_file, replace_symbol, ...)
conventions.py     what MCP expects beyond tools: output schemas, argument
                   errors, the resume prompt, run resources
"""
