"""Undo and redo committed steps, file tools and shell steps alike (docs/undo.md).

What each committed step changed, and which are in effect, is history.py's.
Undoing a set of steps puts each path they changed back to its state before
the earliest of them. That is exact only when no step left in
place changed the path later, and when the path still holds what the log
says the newest step left there; otherwise the undo is refused, naming the
paths (``force``: go ahead, after storing what the paths hold in the log).

An undo is itself a logged step (tool ``undo``: args ``undoes``, ``paths``,
``contents``, ``modes``) written by :meth:`gitwal.run.Run.step` like any file
tool: intent, write, verify, commit, so a crash in the middle is decided by
recovery as usual. ``redo`` puts back exactly what an undo replaced (tool
``redo``, ``args.redoes``). Only the steps themselves can be undone; an
undo is taken back by redoing it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from ..base.errors import ToolRefused, WalError
from ..base.ids import ABSENT, Lsn
from ..changes.history import History, redo_restore, turns, undo_restore
from ..records.model import agent_tag
from ..run import Run
from ..trust.authority import require_steps
from ..worktree import reshape
from ..worktree.overwrite import DIRECTORY, SPECIAL, bring_back, found

__all__ = ["Undo", "diff", "document", "plan_redo", "plan_undo", "redo", "undo"]

_FILE_MODES = (0o100644, 0o100755)


@dataclass(frozen=True)
class Undo:
    """An undo or redo worked out from the log: what each path goes back to."""

    tool: str  # "undo" | "redo"
    lsns: tuple[Lsn, ...]  # the steps it undoes, or (the undo it redoes,)
    paths: tuple[str, ...]
    now: tuple[str, ...]  # what each path holds now
    to: tuple[str, ...]  # the state it is given
    modes: tuple[int, ...]
    drifted: tuple[str, ...]  # paths not holding what the log says (``force``)
    lsn: Lsn | None = None  # the logged step, once done

    def planned(self) -> list[tuple[str, str, str]]:
        """(path, now, to) in the order the paths are written (reshape.order:
        where a path changes kind, the removals in the way first)."""
        return [(self.paths[i], self.now[i], self.to[i])
                for i in reshape.order(self.paths, self.to)]

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "lsn": self.lsn,
                ("undoes" if self.tool == "undo" else "redoes"): list(self.lsns),
                "changes": [{"path": p, "from": a, "to": b} for p, a, b in self.planned()],
                "forced": list(self.drifted)}


def document(repo: pygit2.Repository, done: Undo, run: str, dry_run: bool) -> dict[str, Any]:
    """``done`` as the ``undo`` document (docs/json.md): what the CLI's ``--json``
    and the MCP tool return; a dry run adds the unified diff of the change."""
    saved = [(p, now) for p, now in zip(done.paths, done.now, strict=True)
             if p in done.drifted and now != ABSENT and not dry_run]
    data = done.to_dict() | {"run": run, "dry_run": dry_run, "saved": [
        {"path": p, "object": oid, "command": bring_back(p, oid)} for p, oid in saved]}
    if dry_run:
        data["diff"] = "".join(diff(repo, p, a, b) for p, a, b in done.planned())
    return data


def diff(repo: pygit2.Repository, path: str, old: str, new: str) -> str:
    """git's unified diff of ``path`` from state ``old`` to ``new`` (read-only)."""
    a = None if old == ABSENT else repo.get(old)
    b = None if new == ABSENT else repo.get(new)
    if not isinstance(a, pygit2.Blob | None) or not isinstance(b, pygit2.Blob | None):
        return f"{path}: an object is missing\n"
    patch = pygit2.Patch.create_from(a, b, old_as_path=path, new_as_path=path)
    return str(patch.text or "")


def select(h: History, lsns: Sequence[int] = (), to: int | None = None,
           last: int | None = None, to_checkpoint: bool = False,
           turn: int | None = None) -> tuple[Lsn, ...]:
    """The live steps to undo: ``lsns``; those after ``to``; the newest
    ``last``; those after the newest checkpoint; those of agent turn ``turn``
    (1: the first prompt, -1: the latest); default: the newest one."""
    live = sorted(h.live)
    if turn is not None:
        known = turns(h)
        if not known or turn == 0 or abs(turn) > len(known):
            raise WalError(f"no turn {turn}: the run's agent steps answer {len(known)} "
                           "prompt(s)", "`git wal log` shows each agent step's turn; 1 is "
                           "the first prompt, -1 the latest")
        key = known[turn - 1 if turn > 0 else turn]
        chosen = [n for n in live if (agent_tag(h.steps[n][0]) or {}).get("turn") == key]
        if not chosen:
            raise WalError(f"turn {turn}'s steps were undone already", "`git wal redo` "
                           "puts them back")
        return tuple(chosen)
    if lsns:
        wrong = [n for n in lsns if n not in h.live]
        if wrong:
            n = wrong[0]
            why = ("was undone already (`git wal redo` puts it back)" if n in h.steps else
                   "is an undo or redo (take it back with `git wal redo` or undo the steps "
                   "again)" if n in h.undos or n in h.redone else
                   "is not a committed step of this run")
            raise WalError(f"LSN {n} {why}", "`git wal log` lists the run's steps")
        return tuple(sorted({Lsn(n) for n in lsns}))
    if to is not None:
        chosen = [n for n in live if n > to]
    elif to_checkpoint:
        chosen = [n for n in live if n > h.checkpoint]
    else:
        chosen = live[-(last or 1):] if live else []
    if not chosen:
        raise WalError("no committed step to undo there",
                       "`git wal log` lists the run's steps; undone ones show as undone")
    return tuple(chosen)


def plan_undo(run: Run, h: History, lsns: Sequence[Lsn], force: bool = False) -> Undo:
    """What undoing ``lsns`` writes; refuses a step that cannot be undone alone."""
    chosen = set(lsns)
    return _plan(run, h, "undo", tuple(sorted(chosen)), undo_restore(h, chosen), force)


def plan_redo(run: Run, h: History, undo_lsn: int | None = None,
              force: bool = False) -> Undo:
    """What redoing undo ``undo_lsn`` (default: the newest not redone) writes."""
    if undo_lsn is None:
        open_undos = [n for n in sorted(h.undos) if n not in h.redone]
        if not open_undos:
            raise WalError("nothing to redo: no undo of this run is left to take back",
                           "`git wal log` lists the run's undos")
        undo_lsn = open_undos[-1]
    return _plan(run, h, "redo", (Lsn(undo_lsn),), redo_restore(h, undo_lsn), force)


def _plan(run: Run, h: History, tool: str, lsns: tuple[Lsn, ...],
          restore: dict[str, tuple[str, int]], force: bool) -> Undo:
    paths = tuple(sorted(restore))
    if not paths:
        raise WalError(f"LSN {', '.join(map(str, lsns))} changed nothing to {tool}",
                       "`git wal show LSN` shows what a step changed")
    now, drifted = [], []
    for path in paths:
        state = found(run.wt, path)
        # A directory where the log's newest step left no file is what a step
        # that turned the file into a directory leaves: as for git, the file
        # is absent there (reshape.py). Anywhere else it is someone else's.
        if state == DIRECTORY and h.newest_state(path) == ABSENT:
            state = ABSENT
        if state in (DIRECTORY, SPECIAL):
            raise WalError(f"{path} is a {state} now; {tool} writes files only",
                           "move it away, then try again")
        if state != h.newest_state(path):
            drifted.append(path)
        now.append(state)
        to, mode = restore[path]
        if to != ABSENT and mode not in _FILE_MODES:
            raise WalError(f"{path}: before LSN {lsns[0]} it was not a regular file "
                           f"(mode {mode:o}); {tool} puts back files only",
                           "restore it by hand (`git wal show` names the objects)")
    _refuse_blocked(run, tool, paths, [restore[p][0] for p in paths])
    if drifted and not force:
        raise WalError(f"{', '.join(drifted[:5])}{' and more' if len(drifted) > 5 else ''} "
                       "changed since the log's last step there (someone else's bytes); "
                       f"nothing was {tool}ne", "`git wal show` and `git diff` show the "
                       f"change; --force stores what the paths hold in the log, then "
                       f"{tool}es")
    return Undo(tool, lsns, paths, tuple(now), tuple(restore[p][0] for p in paths),
                tuple(restore[p][1] if restore[p][0] != ABSENT else 0 for p in paths),
                tuple(drifted))


def _refuse_blocked(run: Run, tool: str, paths: Sequence[str], to: Sequence[str]) -> None:
    """Refuse, before anything is logged or written, an undo the tree cannot
    take whole: a file (or link) in the way of a directory one of its paths
    needs, or a directory where a file goes that holds more than it removes.
    Not even ``force`` goes past it: those bytes are not among its paths, so
    it could not store them first."""
    blocked = reshape.blocked(run.wt, paths, to, tool)
    if blocked:
        path, obstacle, why = blocked[0]
        others = len({o for _p, o, _w in blocked}) - 1
        more = f" (and {others} more in the way)" if others else ""
        raise WalError(f"{path}: {why}{more}; nothing was {tool}ne",
                       f"move {obstacle} away (gitwal did not write it), then {tool} again; "
                       f"`git wal {tool} --dry-run` shows what it would write")


def _perform(run: Run, plan: Undo) -> Undo:
    """Log and apply ``plan`` (the caller holds the run lock it was worked out under)."""
    # Another run's step on these paths would race the restore: held off
    # (or this one refused) as for any file step.
    with run.paths_locked(plan.tool, plan.paths):
        pre: list[bytes | None] = []
        modes: list[int] = []
        for path in plan.paths:
            if reshape.is_dir(run.wt, path):  # the file is absent there (_plan)
                pre.append(None)
                modes.append(0)
                continue
            data, mode = run.wt.read(path)
            if data is not None and mode not in _FILE_MODES:
                raise ToolRefused(f"{path} is not a regular file now",
                                  "move it away, then undo again")
            pre.append(data)
            modes.append(mode if data is not None else 0)
        key = "undoes" if plan.tool == "undo" else "redoes"
        args: dict[str, Any] = {
            key: [int(n) for n in plan.lsns] if plan.tool == "undo" else int(plan.lsns[0]),
            "paths": list(plan.paths), "contents": list(plan.to),
            "modes": list(plan.modes)}
        done = run.step(plan.tool, args, plan.paths, pre, modes, plan.to)
    return Undo(plan.tool, plan.lsns, plan.paths, plan.now, plan.to, plan.modes,
                plan.drifted, done.lsn)


def undo(run: Run, lsns: Sequence[int] = (), to: int | None = None, last: int | None = None,
         to_checkpoint: bool = False, force: bool = False, dry_run: bool = False,
         turn: int | None = None) -> Undo:
    """Undo committed steps (default: the newest); ``dry_run``: only work it out."""
    return _carried_out(run, lambda h: plan_undo(
        run, h, select(h, lsns, to, last, to_checkpoint, turn), force), dry_run)


def redo(run: Run, undo_lsn: int | None = None, force: bool = False,
         dry_run: bool = False) -> Undo:
    """Take back an undo (default: the newest not taken back)."""
    return _carried_out(run, lambda h: plan_redo(run, h, undo_lsn, force), dry_run)


def _carried_out(run: Run, plan_of: Callable[[History], Undo], dry_run: bool) -> Undo:
    """The plan worked out from one read of the log; unless a dry run, under the
    run lock, so the log and tree it was worked out from are the ones it changes."""
    if dry_run:
        return plan_of(History.of(run.store.repo, run.records()))
    with run.store.locked():
        records = run.records()
        plan = plan_of(History.of(run.store.repo, records))
        # A log is data: only steps with authority here give their images back.
        require_steps(run.store.repo, records, plan.lsns,
                      f"{plan.tool} LSN {{lsn}} (write the images it names into the tree)")
        return _perform(run, plan)
