"""What a refused stop tells the model: the step still open or the paths
changed with no logged step, and what to do next (rules 1 and 2 of done.py).

Every path named comes from the tree: control characters are escaped, and at
most :data:`SHOWN` are named.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ..base.display import safe
from ..base.ids import TreeId
from ..records.model import Intent, Unlogged, agent_tag
from ..run import Run
from .external import External

SHOWN = 8  # paths named in a reason before "and N more"


def _what(intent: Intent) -> str:
    tag = agent_tag(intent)
    tool = str(tag.get("tool")) if tag else intent.tool
    if intent.tool == "exec":
        argv = intent.args.get("argv", [])
        return f"{tool}: {safe(str(argv[-1] if argv else ''))[:120]}"
    return f"{tool} {_names(intent.target)}"


def _names(paths: Sequence[str]) -> str:
    """Paths for a reason, control characters escaped (names come from the tree)."""
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(safe(p) for p in paths[:SHOWN]) + more


def open_reason(run: Run, ext: External, intent: Intent) -> str:
    head = (f"gitwal: the turn cannot end yet: LSN {intent.lsn} ({_what(intent)}) of run "
            f"{run.id} is still open.")
    if intent.tool == "exec":
        with run.store.locked():
            snap = run.wt.snapshot(run.id)
        changed = ext.wt.changed_paths(TreeId(intent.pre[0]), snap)
        return (f"{head} The command changed {len(changed)} path(s) ({_names(changed)}) and "
                "nothing says whether it finished. Next: if those changes are what you "
                "meant, make any tool call (for example run `git status` with your Bash "
                f"tool): its hook closes LSN {intent.lsn} and records them; if they are not, "
                f"ask the user to run `git wal recover --run {run.id} --restore` in a "
                "terminal, which puts those paths back. Then end your turn again.")
    return (f"{head} Its closing hook never came. Next: check that "
            f"{_names(list(intent.target))} hold what you meant, then make any tool call: "
            f"its hook decides LSN {intent.lsn} from the files. Then end your turn again.")


def unlogged_reason(run: Run, found: Sequence[Unlogged]) -> str:
    paths = sorted({p for r in found for p in r.paths} - {t[0] for r in found for t in r.theirs})
    lsns = ", ".join(str(r.lsn) for r in found)
    args = " ".join(shlex.quote(safe(p)) for p in paths[:SHOWN])
    return (f"gitwal: the turn cannot end yet: {len(paths)} path(s) changed with no logged "
            f"step explaining them ({_names(paths)}), recorded as unlogged at LSN {lsns} of "
            f"run {run.id}. The change may be the user's, another program's, or yours "
            f"through a tool gitwal does not see. Next: look at them (`git status --short "
            f"-- {args}`, `git diff -- {args}`); do not undo a change that is not yours; "
            "finish any that is yours with your own tools; say in your answer what they "
            "are. Then end your turn again (you are told about these changes once).")


__all__ = ["SHOWN", "open_reason", "unlogged_reason"]
