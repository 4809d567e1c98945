"""Shell command lines read as a shell would: the commands a line runs.

lex.py      a line cut into simple commands (lists, pipelines, subshells,
            substitutions, here-documents); what it cannot follow is refused
unwrap.py   wrappers (env, sudo, nice, ...), `sh -c` strings, eval, git's
            global options and aliases: the commands as programs see them
guard.py    what an agent's tool call may not run: a person's decision
            (`git wal approve|resolve`), a change of gitwal's settings
match.py    shell-style patterns (`wal.irreversible`) matched command by command
"""

from .lex import Unparseable, Word
from .unwrap import Command, commands

__all__ = ["Command", "Unparseable", "Word", "commands"]
