"""An agent's irreversible shell calls (``git config --add wal.irreversible
PATTERN``): logged, then put to the user in the agent's own permission prompt.

A shell call whose command matches a pattern (shell-style, as ``fnmatch``:
``git push*``, ``npm publish*``, ``curl -X POST*``) as written, or one of
the commands it runs does (read as a shell would: ``cd . && git -C . push``
runs ``git push``; gitwal/shellwords/), or that cannot be read, is logged like any shell
call but marked irreversible, and the hook answers "ask": the agent shows
the user the command and gitwal's reason, and runs it only if the user
allows it. When the call then closes, the user's yes is recorded as an
``approval`` record (who: git's identity, in the agent's prompt) before the
commit or abort, as `git wal approve` records one for `exec --irreversible`
(gitwal/decisions/approvals.py). A call the user denies never runs; its intent is
settled as any shell call that changed nothing.

Only Claude Code's hooks can ask (``permissionDecision: "ask"``); for the
other agents a matching call is refused, with what to do instead, and
nothing is logged. The patterns are the local user's git config: nothing
read from a log chooses them.
"""

from __future__ import annotations

from ..base.ids import Lsn
from ..decisions.resolve import decider
from ..records.model import Approval, Intent, agent_tag
from ..run import Run
from ..shellwords.match import Hit, first_match

__all__ = ["ASKING_AGENTS", "answered", "ask_reason", "cannot_ask", "matches"]

ASKING_AGENTS = frozenset({"claude-code"})


def matches(command: str, patterns: tuple[str, ...],
            aliases: dict[str, str] | None = None) -> Hit | None:
    """The first pattern ``command`` (or a command it runs) matches, or None."""
    return first_match(command, patterns, aliases)


def ask_reason(intent: Intent, hit: Hit) -> str:
    return (f"gitwal: this command is irreversible here ({hit.why}); it is "
            f"logged as LSN {intent.lsn} and runs only if you allow it. Your answer is "
            "recorded in the log.")


def cannot_ask(agent: str, command: str, hit: Hit) -> str:
    return (f"gitwal: `{command.strip()[:200]}` is irreversible here ({hit.why}) "
            f"and needs a person's approval, which {agent}'s hooks cannot ask "
            "for. Nothing was run or logged. Ask the user to run it themselves with "
            "`git wal exec --irreversible -- sh -c '<command>'` and `git wal approve LSN`, "
            "or to allow it by removing the pattern.")


def answered(run: Run, lsn: Lsn, intent: Intent) -> Approval:
    """The user's yes in the agent's permission prompt, as an approval record."""
    tag = agent_tag(intent) or {}
    who = f"{decider(run.store.repo)}, in {tag.get('name', 'the agent')}'s permission prompt"
    return Approval(run.id, lsn, intent.lsn, who, "allowed when asked")
