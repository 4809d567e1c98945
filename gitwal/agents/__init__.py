"""Each agent's hooks: adapters, the policy, the hook server, installation.

Per agent (each keeps adapter.py's contract and imports only shared code):
claude.py          Claude Code: hook payloads -> actions, replies -> exit code and JSON
claude_version.py  which Claude Code is on PATH; does it take "onFailure": "block"
codex.py           Codex CLI (apply_patch.py parses its patches, patch_seek.py finds hunks)
gemini.py          Gemini CLI (gemini_edit.py its replace/write_file, gemini_compress.py
                   its PreCompress, gemini_trust.py its folder trust for doctor)
apply_patch.py     Codex's apply_patch format: every post-image of a patch
patch_seek.py      where an apply_patch hunk applies, as Codex searches
gemini_edit.py     what Gemini CLI's replace and write_file write
gemini_compress.py is Gemini CLI about to compress its history?
gemini_trust.py    will Gemini CLI run the hooks installed here?
codex_trust.py     Codex's per-hook trust: read, computed, passed on request
common.py          what the adapters share: naming a call, the reply protocol
adapter.py         the adapter contract; finding one by the name users type

The policy, shared by every agent:
actions.py         what an adapter asks for (an Action) and gets back (a Reply)
engine.py          what every agent's hooks do: the policy layer
session.py         the repository, configuration and run of one hook call
external.py        steps whose effect the agent applies: intent at one hook
appending.py       one hook call's turn at a run's log, appended at once
closing.py         closing a step at the next hook: commit, or abort and unlogged
expectation.py     what the log expects the tree to be; unlogged changes named
edits.py           post-images of an agent's file tools, before the tool runs
call.py            which agent call an intent stands for; what a hook call appended
done.py            whether a turn may end (Stop); done_reasons.py, what a refusal says
done_reasons.py    what a refused stop tells the model
refusals.py        tool calls no agent may make
approvals.py       irreversible shell calls: asked in the agent's permission prompt
turns.py           which user prompt a step answers (undo --turn)
context.py         the SessionStart text: facts from the log
config.py          what the hooks read from the local user's git config

The hook process:
hook.py            one hook call in process
server.py          the long-lived hook server; server_stop.py stops it
server_stop.py     stopping a repository's hook server
framing.py         the socket messages of client and server (stdlib only)
client.py          the stdlib-only hook client; hook_client.py starts it
hook_client.py     the fast path of the hook command
plugin_client.py   generates the Claude Code plugin's copy of the client
launch.py          the git-wal-hook entry point and its launch cache

Installing:
install.py         `git wal install|uninstall AGENT`
hook_commands.py   what each gitwal hook handler runs; which handlers are gitwal's
settings.py        an agent's settings file: where, and read and written safely
jsonc.py           JSON with comments, as Gemini CLI reads its settings
mcp_entry.py       gitwal's MCP server entry in each agent's configuration
"""
