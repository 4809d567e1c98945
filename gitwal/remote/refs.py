"""What push and fetch share: the namespaces of log refs, the outcome of a
transfer per ref (docs/remotes.md), which run a ref belongs to, the remote a
command means, and the refspecs `git wal remote setup` configures.

Logs travel through the git CLI, so the user's transports, credentials and
push hooks apply.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..base.errors import NotARepository, WalError
from ..base.ids import RunId, valid_run_id
from ..log.rewrite import ARCHIVE_PREFIX, CHECKPOINT_PREFIX
from ..log.store import Store

BARE_OK = "run this inside a clone (or a bare repository)"

LIVE_PREFIX = "refs/wal/"
NAMESPACES = (LIVE_PREFIX, ARCHIVE_PREFIX, CHECKPOINT_PREFIX)
STAGING_PREFIX = "refs/wal-remote/"

# Fetch outcomes that leave a local log behind what the remote has.
NEEDS_ATTENTION = frozenset({"diverged", "busy", "rejected", "invalid"})


@dataclass(frozen=True)
class RefOutcome:
    """What happened to one ref: ``status`` is one of the values in docs/remotes.md."""

    ref: str
    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"ref": self.ref, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class Transfer:
    """The result of a push or a fetch: one outcome per ref, and the remote's messages."""

    remote: str
    refs: tuple[RefOutcome, ...]
    messages: tuple[str, ...] = ()  # `remote: ...` lines (a server hook's reasons)

    @property
    def ok(self) -> bool:
        return not any(o.status in NEEDS_ATTENTION for o in self.refs)

    def to_dict(self) -> dict[str, object]:
        return {"remote": self.remote, "ok": self.ok,
                "refs": [o.to_dict() for o in self.refs], "messages": list(self.messages)}


# -- git plumbing -------------------------------------------------------------


def run_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def last_line(text: str) -> str:
    """What git said went wrong: its first ``fatal:``/``error:`` line (the advice
    that follows, "Please make sure you have the correct access rights...", is
    not the cause), else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    causes = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return causes[0] if causes else lines[-1] if lines else "no output"


def resolve_remote(cwd: Path, name: str | None) -> str:
    """``name``, or the current branch's upstream remote, or ``origin``; it must exist."""
    if name is None:
        branch = run_git(cwd, "symbolic-ref", "-q", "--short", "HEAD").stdout.strip()
        upstream = ""
        if branch:
            upstream = run_git(cwd, "config", f"branch.{branch}.remote").stdout.strip()
        name = upstream if upstream and upstream != "." else "origin"
    listed = run_git(cwd, "remote")
    if listed.returncode != 0:
        raise NotARepository(f"not a git repository: {os.path.abspath(cwd)}",
                             "run this inside a clone (or a bare repository)")
    remotes = listed.stdout.split()
    if name not in remotes:
        known = f"remotes here: {', '.join(remotes)}" if remotes else "this repository has none"
        raise WalError(f"no remote named {name!r} ({known})",
                       "name a configured remote, or add one: `git remote add NAME URL` "
                       "(logs fetched from it are staged under refs/wal-remote/NAME/)")
    # The name becomes part of a ref under refs/wal-remote/.
    if run_git(cwd, "check-ref-format", f"{STAGING_PREFIX}{name}/x").returncode != 0:
        raise WalError(f"the remote name {name!r} cannot be part of a ref name",
                       "rename it: `git remote rename OLD NEW`")
    return name


def ancestor_or_same(repo: pygit2.Repository, older: str, newer: str) -> bool:
    if older == newer:
        return True
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=newer), pygit2.Oid(hex=older)))
    except (KeyError, ValueError, pygit2.GitError):
        return False  # an object we do not have: not provably an ancestor


def split_ref(ref: str) -> tuple[str, str] | None:
    """(namespace, run) of a ref gitwal writes, None for any other name."""
    for prefix in NAMESPACES:
        if ref.startswith(prefix):
            rest = ref[len(prefix):]
            if prefix == LIVE_PREFIX:
                return (prefix, rest) if valid_run_id(rest) else None
            run, _, n = rest.rpartition("/")
            return (prefix, run) if valid_run_id(run) and n.isdigit() else None
    return None


def log_refs(repo: pygit2.Repository, runs: Iterable[str]) -> dict[str, str]:
    """Every log ref of ``runs`` here (live, archives, checkpoints) -> its target."""
    wanted = set(runs)
    out: dict[str, str] = {}
    for name in repo.references:
        where = split_ref(name)
        if where is not None and where[1] in wanted:
            out[name] = str(repo.references[name].target)
    return out


def archived(repo: pygit2.Repository, run: str, commit: str) -> str | None:
    """The archive ref of ``run`` that keeps ``commit`` reachable, if any."""
    for n, head in Store(repo, RunId(run)).archives():
        if ancestor_or_same(repo, commit, head):
            return f"{ARCHIVE_PREFIX}{run}/{n}"
    return None


def staging_prefix(remote: str) -> str:
    return f"{STAGING_PREFIX}{remote}/"


def fetch_refspecs(remote: str, run: str | None = None) -> list[str]:
    """Forced, but only into the staging copy: refs/wal-remote/<remote>/wal/<run>, ...

    With ``run``, that run's refs only. Its live pattern also matches runs
    whose name starts with ``run`` (a refspec has one ``*``, and a missing
    exact source fails the fetch): the caller integrates ``run`` alone.
    """
    stage = staging_prefix(remote)
    out = []
    for ns in NAMESPACES:
        tail = "*" if run is None else f"{run}*" if ns == LIVE_PREFIX else f"{run}/*"
        out.append(f"+{ns}{tail}:{stage}{ns[len('refs/'):]}{tail}")
    return out


def push_refspecs() -> list[str]:
    return [f"{ns}*:{ns}*" for ns in NAMESPACES]
