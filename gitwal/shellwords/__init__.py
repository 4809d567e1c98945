"""Shell command lines read as a shell would: the commands a line runs.

lex.py      a line cut into simple commands (lists, pipelines, subshells,
            substitutions, here-documents); what it cannot follow is refused
word.py     one word of a line: quotes removed, expansions kept as written
            and marked dynamic
unwrap.py   wrappers (env, sudo, nice, ...), `sh -c` strings, eval, git's
            global options and aliases: the commands as programs see them
wrappers.py the wrappers unwrap.py sees through: the options each knows,
            taken off its words
guard.py    what an agent's tool call may not run: a person's decision
            (`git wal approve|resolve`), a change of gitwal's settings
match.py    shell-style patterns (`wal.irreversible`) matched command by command
"""

from .unwrap import Command, commands
from .word import Unparseable, Word

__all__ = ["Command", "Unparseable", "Word", "commands"]
