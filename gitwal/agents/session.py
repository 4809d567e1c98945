"""The repository, configuration and run of one hook call (:class:`Session`).

One run per agent session: its id is derived from the session id
(:func:`run_id_for`), so a resumed session continues its run. A path is the
session's business only inside the working tree and outside ``.git``
(:meth:`Session.tree_path`); how much of the tree a call compares follows
``wal.agent.treeCheck`` (:meth:`Session.external`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import NotARepository, PathRefused, UnknownRun, WalError
from ..base.ids import RunId, valid_run_id
from ..base.repository import wal_dir
from ..run import Run
from ..wal import Wal
from .config import Config
from .external import External


def run_id_for(prefix: str, session_id: str) -> RunId:
    """The run of an agent session: ``<prefix>-<session id>`` (hashed if unsafe)."""
    rid = RunId(f"{prefix}-{session_id}")
    if session_id and re.fullmatch(r"[0-9A-Za-z._-]{1,90}", session_id) and valid_run_id(rid):
        return rid
    digest = hashlib.sha1(session_id.encode("utf-8", "replace")).hexdigest()[:32]
    return RunId(f"{prefix}-{digest}")


@dataclass
class Session:
    """The repository, configuration and run of one hook call."""

    wal: Wal
    config: Config
    run_id: RunId
    agent: str
    cwd: Path
    served: bool = False  # by the hook server, which checks the whole tree after each call
    async_close: frozenset[str] = frozenset()  # tools whose closing hook is `async`

    @classmethod
    def open(cls, cwd: str | None, agent: str, prefix: str, session_id: str,
             served: bool = False, async_close: frozenset[str] = frozenset()
             ) -> Session | None:
        """None when ``cwd`` is not in a git working tree (nothing to log)."""
        where = Path(cwd) if cwd and Path(cwd).is_dir() else Path.cwd()
        try:
            wal = Wal(where)
        except (NotARepository, WalError):
            return None
        return cls(wal, Config.of(wal.repo), run_id_for(prefix, session_id), agent, where,
                   served, async_close)

    def exists(self) -> bool:
        try:
            self.wal.run(self.run_id, read_only=True)
        except UnknownRun:
            return False
        return True

    def run(self) -> Run:
        """The session's run, begun on first use (its plan names the session)."""
        try:
            return self.wal.run(self.run_id)
        except UnknownRun:
            pass
        try:
            return self.wal.begin(task=f"{self.agent} session {self.run_id}",
                                  run_id=self.run_id)
        except WalError:
            if self.exists():  # another hook of the session began it first
                return self.wal.run(self.run_id)
            raise

    def external(self, run: Run, shell: bool = False) -> External:
        mode = self.config.tree_check
        full = mode == "always" or shell
        if mode == "auto" and not full and not self.served:
            index = wal_dir(self.wal.repo) / "index" / run.id
            n = index_entries(str(index))
            if n is None:
                n = index_entries(str(Path(self.wal.repo.path) / "index"))
            full = n is not None and n <= self.config.tree_check_limit
        return External(run, full_check=full, async_close=self.async_close)

    def tree_dir(self, directory: str | None = None) -> str | None:
        """The agent's working directory (or ``directory``, relative to it) relative
        to the top of the tree ("" at it); None outside the tree."""
        real = Path(os.path.realpath(self.cwd / directory if directory else self.cwd))
        root = self.wal.wt.root
        if real == root:
            return ""
        return real.relative_to(root).as_posix() if root in real.parents else None

    def tree_path(self, path: str) -> str | None:
        """``path`` relative to the top of the tree, or None when it is not ours."""
        p = Path(path)
        if not p.is_absolute():
            p = self.cwd / p
        real = Path(os.path.realpath(p))
        root = self.wal.wt.root
        if real != root and root not in real.parents:
            return None
        rel = real.relative_to(root).as_posix()
        try:
            return self.wal.wt.confine(rel)
        except PathRefused:
            return None


INDEX_HEADER = 12  # bytes: "DIRC", version, entry count (git's index format)


def index_entries(path: str) -> int | None:
    """How many entries a git index file holds (its header), or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(INDEX_HEADER)
    except OSError:
        return None
    if len(head) < INDEX_HEADER or head[:4] != b"DIRC":
        return None
    return int.from_bytes(head[8:12], "big")
