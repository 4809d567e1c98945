"""The entry point a harness imports: open a repository, begin or find runs,
recover. Which run is current is kept per worktree inside the git dir."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from .base.durable import atomic_write, makedirs_durable, unlink_durable
from .base.errors import CorruptLog, UnknownRun, WalError
from .base.ids import Lsn, RunId, new_run_id, valid_run_id
from .base.repository import common_dir, open_repository, wal_dir, worktree_name
from .log.appends import repair_hint
from .log.runs import list_runs, segments_history
from .log.store import Store
from .records.model import Plan, Record
from .remote.fence import refuse_if_fenced
from .remote.refs import resolve_remote
from .remote.replica_state import bound_here, choose_remote, remote_state
from .remote.replicate import Replication
from .signing.signer import configured_signer
from .status import RunInfo, Status, run_status
from .together.claims import now_s, run_claims
from .together.remote_claims import live_remote_claims
from .worktree.tree import Worktree

if TYPE_CHECKING:  # loaded when used: `status` needs none of them
    from .log.repair import RepairResult
    from .recovery.report import Report
    from .recovery.resume import Resumed
    from .run import Run


class OtherWorktree(WalError):
    """The run is bound to another worktree: it may change only that tree."""


class Wal:
    """A repository's write-ahead logs."""

    def __init__(self, path: str | os.PathLike[str] = ".") -> None:
        # The working tree by git's rules (.git files, core.worktree, GIT_DIR,
        # GIT_WORK_TREE, linked worktrees), not the git dir's parent.
        self.repo = open_repository(path)
        self.wt = Worktree(self.repo)
        # Every store opened here tells it of its appends (docs/remote-runs.md).
        self.replication = Replication(self.repo)

    # -- runs ------------------------------------------------------------

    def begin(
        self, task: str = "", run_id: str | None = None, steps: Sequence[str] = (),
        remote: str | None = None, *, group_commit: bool = False,
    ) -> Run:
        """Start a run: write its plan (LSN 1) and make it current; ``remote``:
        replicate this run's appends there (else to ``wal.remote``, if set);
        ``group_commit``: as for :meth:`run`."""
        rid = RunId(run_id) if run_id else new_run_id()
        if not valid_run_id(rid):
            raise WalError(f"invalid run id {rid!r}",
                           "use letters, digits, '.', '_' and '-' (up to 100)")
        if self.repo.head_is_unborn:
            raise WalError("the repository has no commit yet (HEAD is unborn)",
                           "make a first commit, then begin a run")
        store = Store(self.repo, rid, configured_signer(self.repo))
        if store.exists():
            raise WalError(f"run {rid} already exists",
                           "pick another --run id, or omit --run for a fresh one")
        self.replication.check()
        if remote is not None:
            choose_remote(self.repo, rid, resolve_remote(Path(self.wt.root), remote))
        store.replica = self.replication
        branch = None if self.repo.head_is_detached else self.repo.head.shorthand
        plan = Plan(rid, Lsn(1), task, str(self.repo.head.target), branch, tuple(steps),
                    (worktree_name(self.repo), str(self.wt.root)))
        with store.locked():
            # No log exists and we hold the run lock: a ref lock is a leftover.
            store.clear_stale_ref_lock()
            store.append([plan], [], None)
        self._set_current(rid)
        from .run import Run

        return Run(store, self.wt, group_commit)

    def run(self, run_id: str | None = None, *, read_only: bool = False,
            wait_timeout: float | None = None, group_commit: bool = False) -> Run:
        """The named run, or the current one.

        Unless ``read_only``, the run must belong to this worktree: its log is
        shared by every worktree, but its steps changed the tree it began in,
        and only that tree may be written, judged or restored for it. This is
        the one place that is enforced. ``wait_timeout``: how long its writers
        wait for the run lock (None: ``git config wal.waitTimeout``, else for ever).

        ``group_commit``: a file step's commit record is held back and rides
        in the run's next append, one append per step instead of two; the
        step returns with ``durable=False`` until then, ``run.flush()`` (or a
        normal exit of the process) writes it, and a crash before leaves the
        step "applied, commit missing" for recovery (docs/format.md, "Group
        commit"). For a process that makes many steps.
        """
        from .run import Run

        return Run(self._store(run_id, read_only, wait_timeout), self.wt, group_commit)

    def _store(self, run_id: str | None, read_only: bool = True,
               wait_timeout: float | None = None) -> Store:
        rid = RunId(run_id) if run_id else self.current()
        if not valid_run_id(rid):
            raise UnknownRun(f"invalid run id {rid!r}", "list runs with `git wal runs`")
        store = Store(self.repo, rid, configured_signer(self.repo))
        if not store.exists():
            raise UnknownRun(f"no run {rid}", "list runs with `git wal runs`")
        if wait_timeout is not None:
            store.wait_timeout = wait_timeout
        store.replica = self.replication
        if not read_only:
            self.replication.check()
            # Seen by this clone's own push: the run goes on in another clone.
            refuse_if_fenced(self.repo, rid)
            head = store.head()
            assert head is not None
            self._refuse_other_worktree(rid, store.root_plan(head).worktree)
            # Nothing is written on top of (or in the name of) a damaged head.
            problem = store.append_problem(head)
            if problem is not None:
                raise CorruptLog(problem, repair_hint(rid))
        return store

    def _refuse_other_worktree(self, rid: RunId, bound: tuple[str, str] | None) -> None:
        """A run bound to another worktree (by name: a moved repository keeps it)."""
        here = worktree_name(self.repo)
        if bound is None or bound[0] == here or bound_here(self.repo, rid) == here:
            return  # an old log, unbound, works anywhere; a run taken over, where it was
        name, logged = bound
        which = "the main worktree" if name == "" else f"worktree {name!r}"
        found = self._worktree_path(name)
        # The path shown is git's own record of that worktree when there is
        # one; the log's (possibly fetched) text only quoted, as a last resort.
        where = str(found) if found is not None else logged
        shown = shlex.quote(where if where.isprintable() else repr(where))
        absent = "" if found is not None else " (no such worktree in this repository now)"
        raise OtherWorktree(
            f"run {rid} belongs to {which} at {shown}{absent}, not to this one "
            f"({self.wt.root}); it may change only the tree it began in",
            f"run the command there: cd {shown} && git wal ... --run {rid} "
            f"(`git wal status --run {rid}` works from anywhere)",
        )

    def _worktree_path(self, name: str) -> Path | None:
        """The working tree of this repository's worktree ``name`` ("" = main),
        from git's own records, never from a log; None if there is none."""
        common = common_dir(self.repo)
        if name == "":
            main = pygit2.Repository(str(common))
            return None if main.workdir is None else Path(main.workdir).resolve()
        if "/" in name or name in (".", "..") or not name.isprintable():
            return None
        try:
            gitfile = Path((common / "worktrees" / name / "gitdir").read_text().strip())
        except OSError:
            return None
        return gitfile.parent.resolve() if gitfile.parent.is_dir() else None

    def current(self) -> RunId:
        path = wal_dir(self.repo) / "current"
        try:
            rid = path.read_text().strip()
        except FileNotFoundError:
            raise UnknownRun("no current run in this worktree",
                             "start one with `git wal begin --task TEXT`") from None
        return RunId(rid)

    def _set_current(self, rid: RunId) -> None:
        d = wal_dir(self.repo)
        if not d.is_dir():
            makedirs_durable(d)
        atomic_write(d / "current", (rid + "\n").encode(), tag="new")

    def forget_current(self, rid: str) -> None:
        """Stop naming ``rid`` as the current run (after it was dropped)."""
        path = wal_dir(self.repo) / "current"
        try:
            if path.read_text().strip() == rid:
                unlink_durable(path)
        except FileNotFoundError:
            pass

    def runs(self) -> list[RunInfo]:
        try:
            current: str | None = self.current()
        except UnknownRun:
            current = None
        out = []
        now = now_s()
        remote_claims = live_remote_claims(self.repo)
        for rid in list_runs(self.repo):
            # One damaged log is reported as such; it never hides the others.
            try:
                st = self.status(rid)
            except UnknownRun:
                continue  # dropped since we listed it
            except WalError as e:  # CorruptLog, or anything else one log can raise
                out.append(RunInfo(rid, "", 0, (), rid == current, damaged=e.message))
                continue
            out.append(RunInfo(rid, st.task, st.records, st.open, rid == current,
                               st.worktree, claims=tuple(run_claims(self.repo, rid, now)),
                               remote=st.remote, remote_claims=tuple(
                                   c for c in remote_claims if st.remote is not None
                                   and c[0].remote == st.remote.name)))
        return out

    def status(self, run_id: str | None = None) -> Status:
        """Intents after the newest checkpoint (the cost does not grow before it)."""
        st = run_status(self._store(run_id))
        bound = bound_here(self.repo, st.run)  # taken over here: where it goes on
        if bound is not None and (path := self._worktree_path(bound)) is not None:
            st = replace(st, worktree=(bound, str(path)))
        return replace(st, remote=remote_state(self.repo, st.run))

    def history(self, run_id: str | None = None) -> list[tuple[Record, bytes]]:
        """Every record of the run, archived segments included, in LSN order.

        Segments overlap (an archive ends where the next segment's checkpoint
        already is); an LSN found twice must hold the same record both times.
        """
        return segments_history(self.repo, RunId(run_id) if run_id else self.current())

    # -- recovery --------------------------------------------------------

    def recover(self, run_id: str | None = None, redo: bool = False, restore: bool = False,
                inside: str | None = None) -> Report:
        """Decide every open intent, repair, and report (see recovery/decide.py).

        ``inside``: the agent whose tool call runs this (``calling_agent``); an
        open shell step of that agent is then refused as still running.
        """
        run = self.run(run_id)
        with run.store.locked(wait=False):
            from .recovery.decide import Recovery

            return Recovery(run.store, self.wt, redo, restore, inside).run()

    def resume(self, run_id: str, remote: str | None = None) -> Resumed:
        """Take ``run_id`` over from its remote into this clone and worktree: the
        tree at its last committed step, its open intent decided, the run current
        (recovery/resume.py; docs/remote-runs.md, "Taking a run over")."""
        from .recovery.resume import resume

        done = resume(self.wt, run_id, remote)
        self._set_current(RunId(run_id))
        return done

    def report(self, run_id: str | None = None) -> Report:
        """The same report without changing anything (for `git wal prompt`).

        From another worktree it judges the run's own tree, never this one."""
        run = self.run(run_id, read_only=True)
        head = run.store.head()
        assert head is not None
        bound = run.store.root_plan(head).worktree
        wt = self.wt
        if bound is not None and bound[0] != worktree_name(self.repo):
            # The run's own tree, found through git's records of this
            # repository's worktrees (a log's path could name any directory).
            path = self._worktree_path(bound[0])
            own = Wal(path) if path is not None else None
            if own is None or worktree_name(own.repo) != bound[0] or \
                    common_dir(own.repo).resolve() != common_dir(self.repo).resolve():
                self._refuse_other_worktree(run.id, bound)
            assert own is not None
            wt = own.wt
        from .recovery.decide import Recovery

        return Recovery(run.store, wt, False, False).run(dry_run=True)

    def repair(self, run_id: str) -> RepairResult:
        """Cut a damaged log back to its newest intact append (log/repair.py); it
        changes the log only, so it works from any worktree."""
        if not valid_run_id(run_id) or not (store := Store(self.repo, RunId(run_id))).exists():
            raise UnknownRun(f"no run {run_id}", "list runs with `git wal runs`")
        from .log.repair import repair as repair_log

        return repair_log(store)
