"""Run logs on remotes: `git wal push`, `git wal fetch`, `git wal remote setup`.

Logs travel through the git CLI, so the user's transports, credentials and
push hooks apply. Nothing here forces a log (docs/remotes.md):

* push sends ``refs/wal/<run>``, ``refs/wal-archive/<run>/<n>`` and
  ``refs/wal-checkpoints/<run>/<lsn>`` under the same names with refspecs
  that have no ``+``: git refuses any update that is not a fast-forward, and
  that refusal is reported per ref, never retried. One update that is not a
  fast-forward is sent on purpose, as a compare-and-swap: a run compacted here
  replaces the remote's live chain only if the remote's head is exactly the
  one read, and an archive pushed first keeps it (``--force-with-lease``), so
  the remote loses no record.
* fetch mirrors the remote's logs into ``refs/wal-remote/<remote>/...`` (a
  copy of what the remote has, overwritten like ``refs/remotes/``), then moves
  local refs by compare-and-swap through :class:`~gitwal.store.Store` (the
  only writer of ``refs/wal/*``): create, fast-forward, or report; a local log
  is never rewound or replaced by one that does not continue it, and nothing
  that fails the chain checks is integrated (:mod:`gitwal.remote_checks`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from .display import safe
from .errors import NotARepository, RunBusy, WalError
from .ids import CommitId, RunId, valid_run_id
from .remote_checks import chain_defect, compaction_defect
from .repository import open_repository
from .runs import select_runs
from .secret_scan import SecretInLog, scan
from .store import ARCHIVE_PREFIX, CHECKPOINT_PREFIX, Store

_BARE_OK = "run this inside a clone (or a bare repository)"

LIVE_PREFIX = "refs/wal/"
NAMESPACES = (LIVE_PREFIX, ARCHIVE_PREFIX, CHECKPOINT_PREFIX)
STAGING_PREFIX = "refs/wal-remote/"
PUSH_BATCH = 200  # refspecs per `git push`: keeps the command line far below ARG_MAX

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


@dataclass(frozen=True)
class ConfigChange:
    key: str
    value: str
    added: bool  # False: it was configured already


# -- git plumbing -------------------------------------------------------------


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"



def resolve_remote(cwd: Path, name: str | None) -> str:
    """``name``, or the current branch's upstream remote, or ``origin``; it must exist."""
    if name is None:
        branch = _git(cwd, "symbolic-ref", "-q", "--short", "HEAD").stdout.strip()
        upstream = ""
        if branch:
            upstream = _git(cwd, "config", f"branch.{branch}.remote").stdout.strip()
        name = upstream if upstream and upstream != "." else "origin"
    listed = _git(cwd, "remote")
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
    if _git(cwd, "check-ref-format", f"{STAGING_PREFIX}{name}/x").returncode != 0:
        raise WalError(f"the remote name {name!r} cannot be part of a ref name",
                       "rename it: `git remote rename OLD NEW`")
    return name


def _ancestor_or_same(repo: pygit2.Repository, older: str, newer: str) -> bool:
    if older == newer:
        return True
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=newer), pygit2.Oid(hex=older)))
    except (KeyError, ValueError, pygit2.GitError):
        return False  # an object we do not have: not provably an ancestor


def _split(ref: str) -> tuple[str, str] | None:
    """(namespace, run) of a ref gitwal writes, None for any other name."""
    for prefix in NAMESPACES:
        if ref.startswith(prefix):
            rest = ref[len(prefix):]
            if prefix == LIVE_PREFIX:
                return (prefix, rest) if valid_run_id(rest) else None
            run, _, n = rest.rpartition("/")
            return (prefix, run) if valid_run_id(run) and n.isdigit() else None
    return None


def _log_refs(repo: pygit2.Repository, runs: Iterable[str]) -> dict[str, str]:
    """Every log ref of ``runs`` here (live, archives, checkpoints) -> its target."""
    wanted = set(runs)
    out: dict[str, str] = {}
    for name in repo.references:
        where = _split(name)
        if where is not None and where[1] in wanted:
            out[name] = str(repo.references[name].target)
    return out


def _archived(repo: pygit2.Repository, run: str, commit: str) -> str | None:
    """The archive ref of ``run`` that keeps ``commit`` reachable, if any."""
    for n, head in Store(repo, RunId(run)).archives():
        if _ancestor_or_same(repo, commit, head):
            return f"{ARCHIVE_PREFIX}{run}/{n}"
    return None


# -- push -----------------------------------------------------------------------

_PUSHED = {"*": "created", " ": "updated", "+": "compacted", "=": "up-to-date",
           "!": "rejected", "-": "deleted"}


def _porcelain(stdout: str) -> dict[str, RefOutcome]:
    """`git push --porcelain` lines: ``<flag>\\t<src>:<dst>\\t<summary>``."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or len(parts[0]) != 1 or ":" not in parts[1]:
            continue
        dst = parts[1].split(":", 1)[1]
        status = _PUSHED.get(parts[0], "rejected")
        out[dst] = RefOutcome(dst, status, parts[2].strip() if status != "up-to-date" else "")
    return out


def _push_batch(cwd: Path, remote: str, refs: Sequence[str],
                leases: dict[str, str]) -> tuple[list[RefOutcome], list[str]]:
    outcomes: list[RefOutcome] = []
    messages: list[str] = []
    for i in range(0, len(refs), PUSH_BATCH):
        batch = refs[i:i + PUSH_BATCH]
        args = ["push", "--porcelain", "--no-follow-tags", "--recurse-submodules=no"]
        args += [f"--force-with-lease={ref}:{leases[ref]}" for ref in batch if ref in leases]
        proc = _git(cwd, *args, remote, *[f"{ref}:{ref}" for ref in batch])
        messages += [ln.rstrip() for ln in proc.stderr.splitlines() if ln.startswith("remote:")]
        seen = _porcelain(proc.stdout)
        if not seen and proc.returncode != 0:
            raise WalError(f"git push to {remote} failed: {_last_line(proc.stderr)}",
                           "check the remote's URL and your access (`git remote -v`); "
                           "nothing was pushed")
        for ref in batch:
            outcomes.append(seen.get(ref) or RefOutcome(
                ref, "rejected", f"git reported nothing for it: {_last_line(proc.stderr)}"))
    return outcomes, messages


def _remote_heads(cwd: Path, remote: str, refs: Sequence[str]) -> dict[str, str]:
    proc = _git(cwd, "ls-remote", remote, *refs)
    if proc.returncode != 0:
        raise WalError(f"cannot read the logs of {remote}: {_last_line(proc.stderr)}",
                       "check the remote's URL and your access (`git remote -v`)")
    heads = {}
    for line in proc.stdout.splitlines():
        oid, _, name = line.partition("\t")
        if name in refs:
            heads[name] = oid
    return heads


def _leases(cwd: Path, repo: pygit2.Repository, remote: str,
            local: dict[str, str]) -> dict[str, str]:
    """Live refs compacted here: ref -> the remote head an archive of this push keeps."""
    compacted_runs = set()
    for ref in local:
        where = _split(ref)
        if where is not None and where[0] == ARCHIVE_PREFIX:
            compacted_runs.add(where[1])
    live = [f"{LIVE_PREFIX}{run}" for run in sorted(compacted_runs)
            if f"{LIVE_PREFIX}{run}" in local]
    if not live:
        return {}
    leases = {}
    for ref, theirs in _remote_heads(cwd, remote, live).items():
        ours = local[ref]
        if _ancestor_or_same(repo, theirs, ours):
            continue  # a plain fast-forward (or nothing to do)
        if _archived(repo, ref[len(LIVE_PREFIX):], theirs):
            leases[ref] = theirs
    return leases


def _refuse_secrets(repo: pygit2.Repository, runs: Iterable[str]) -> None:
    """Nothing is pushed when a log holds an untracked secret-looking file.

    A guarded remote keeps every record for good, so this is the last point
    at which such a file can stay on this machine (docs/security.md "Secrets").
    """
    leaks = [leak for run in runs for leak in scan(repo, run)]
    if not leaks:
        return
    first = leaks[0]
    more = f" (and {len(leaks) - 1} more path(s))" if len(leaks) > 1 else ""
    shown = safe(first.path)
    raise SecretInLog(
        f"refusing to push run {first.run}: its log holds {shown}, which matches a secret "
        f"pattern and is not tracked in the run's base commit ({first.where}){more}; "
        "nothing was pushed",
        f"if it is not a secret, allow it with `git config --add wal.secretPattern "
        f"{shlex.quote('!/' + first.path)}` and push again; if it is, keep this run here "
        "(`git wal push --run OTHER` sends other runs) and treat the secret as exposed "
        "wherever the log was copied")


def push(cwd: Path, remote: str | None, run_id: str | None, everything: bool) -> Transfer:
    """Push the selected runs' logs (default: the current run, else every run)."""
    name = resolve_remote(cwd, remote)
    repo = open_repository(cwd, _BARE_OK)
    runs = select_runs(repo, run_id, everything)
    _refuse_secrets(repo, runs)
    local = _log_refs(repo, runs)
    if not local:
        return Transfer(name, ())
    leases = _leases(cwd, repo, name, local)
    first = sorted(ref for ref in local if ref not in leases)
    outcomes, messages = _push_batch(cwd, name, first, {})
    landed = {o.ref for o in outcomes if o.status in ("created", "up-to-date")}
    second: list[str] = []
    held: list[str] = []
    for ref in sorted(leases):
        run = ref[len(LIVE_PREFIX):]
        archives = [r for r in local if r.startswith(f"{ARCHIVE_PREFIX}{run}/")]
        # The old chain must be on the remote before the live ref leaves it.
        (second if all(a in landed for a in archives) else held).append(ref)
    if second:
        more, msgs = _push_batch(cwd, name, second, leases)
        outcomes += more
        messages += msgs
    outcomes += [RefOutcome(ref, "rejected", "not sent: its archive did not land")
                 for ref in held]
    return Transfer(name, tuple(sorted(outcomes, key=lambda o: o.ref)), tuple(messages))


# -- fetch ----------------------------------------------------------------------


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


def _staged(repo: pygit2.Repository, remote: str) -> dict[str, str]:
    """Local ref name -> what the remote had at the last fetch."""
    stage = staging_prefix(remote)
    out = {}
    for name in repo.references:
        if name.startswith(stage):
            out["refs/" + name[len(stage):]] = str(repo.references[name].target)
    return out


def _describe_split(repo: pygit2.Repository, ours: str, theirs: str) -> str:
    try:
        base = repo.merge_base(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    except (KeyError, ValueError, pygit2.GitError):
        base = None
    since = f"they share history up to {str(base)[:12]}" if base else "no common history"
    return f"local {ours[:12]}, remote {theirs[:12]}: {since}"


def _integrate_live(repo: pygit2.Repository, run: str, ref: str, theirs: str) -> RefOutcome:
    store = Store(repo, RunId(run))
    try:
        with store.locked(wait=False):
            ours = store.head()
            if ours is not None and ours == theirs:
                return RefOutcome(ref, "up-to-date")
            if ours is not None and _ancestor_or_same(repo, theirs, ours):
                return RefOutcome(ref, "ahead", "push it with `git wal push`")
            if ours is None and (kept := _archived(repo, run, theirs)):
                return RefOutcome(ref, "dropped",
                                  f"dropped here (kept in {kept}); the remote still has it")
            # Whatever comes in must be a log before any ref points at it.
            if (bad := chain_defect(repo, run, ref, theirs)) is not None:
                return RefOutcome(ref, "invalid", bad)
            if ours is None:
                store.create_ref(ref, theirs)
                return RefOutcome(ref, "created", theirs[:12])
            if _ancestor_or_same(repo, ours, theirs):
                store.move_head(ours, CommitId(theirs))
                return RefOutcome(ref, "updated", f"{ours[:12]}..{theirs[:12]}")
            why = "no archive keeps the local head"
            for n, head in store.archives():
                archive = f"{ARCHIVE_PREFIX}{run}/{n}"
                why = compaction_defect(repo, run, ours, archive, head, theirs) or ""
                if not why:
                    # Compacted on the remote: the archive keeps our head, and
                    # the new chain joins it record for record.
                    store.move_head(ours, CommitId(theirs))
                    return RefOutcome(ref, "compacted", f"{ours[:12]} is kept in {archive}")
            return RefOutcome(ref, "diverged", f"{_describe_split(repo, ours, theirs)}; {why}")
    except RunBusy as e:
        return RefOutcome(ref, "busy", e.message)


def _integrate_once(repo: pygit2.Repository, run: str, ref: str, theirs: str) -> RefOutcome:
    """Archives and detached checkpoints are written once: create, or compare."""
    current = repo.references.get(ref)
    if current is None:
        if ref.startswith(ARCHIVE_PREFIX) and (
                bad := chain_defect(repo, run, ref, theirs, live=False)) is not None:
            return RefOutcome(ref, "invalid", bad)
        try:
            Store(repo, RunId(run)).create_ref(ref, theirs)
        except RunBusy as e:
            return RefOutcome(ref, "busy", e.message)
        return RefOutcome(ref, "created", theirs[:12])
    ours = str(current.target)
    if ours == theirs:
        return RefOutcome(ref, "up-to-date")
    return RefOutcome(ref, "diverged", f"written once, but {_describe_split(repo, ours, theirs)}")


def fetch(cwd: Path, remote: str | None, offline: bool = False,
          run: str | None = None) -> Transfer:
    """Fetch the remote's logs (or ``run``'s alone) into the staging namespace,
    then integrate them."""
    name = resolve_remote(cwd, remote)
    if run is not None and not valid_run_id(run):
        raise WalError(f"invalid run id {run!r}",
                       "run ids are letters, digits, '.', '_' and '-' (`git wal runs`)")
    if not offline:
        specs = fetch_refspecs(name, run)
        proc = _git(cwd, "fetch", "--no-tags", "--prune", "--no-write-fetch-head",
                    "--recurse-submodules=no", name, *specs)
        if proc.returncode != 0:
            raise WalError(f"git fetch {name} failed: {_last_line(proc.stderr)}",
                           "check the remote's URL and your access (`git remote -v`); "
                           "no local log was changed")
    repo = open_repository(cwd, _BARE_OK)  # opened after the fetch: its objects are visible
    staged = _staged(repo, name)
    if run is not None:
        staged = {ref: oid for ref, oid in staged.items()
                  if (where := _split(ref)) is not None and where[1] == run}
        if not staged:
            raise WalError(f"remote {name} has no log of run {run}",
                           f"`git ls-remote {name} 'refs/wal/*'` lists the runs it has")
    # Archives first: a live ref the remote compacted moves only once they are here.
    order = {ARCHIVE_PREFIX: 0, CHECKPOINT_PREFIX: 1, LIVE_PREFIX: 2}

    def rank(ref: str) -> tuple[int, str]:
        where = _split(ref)
        return (order[where[0]] if where else 3, ref)

    outcomes = []
    for ref in sorted(staged, key=rank):
        where = _split(ref)
        if where is None:
            outcomes.append(RefOutcome(ref, "ignored", "not a name gitwal writes"))
        elif where[0] == LIVE_PREFIX:
            outcomes.append(_integrate_live(repo, where[1], ref, staged[ref]))
        else:
            outcomes.append(_integrate_once(repo, where[1], ref, staged[ref]))
    return Transfer(name, tuple(sorted(outcomes, key=lambda o: o.ref)))


# -- remote setup -----------------------------------------------------------------


def push_refspecs() -> list[str]:
    return [f"{ns}*:{ns}*" for ns in NAMESPACES]


def setup(cwd: Path, remote: str) -> list[ConfigChange]:
    """Make plain `git push` / `git fetch` carry logs to and from ``remote``; idempotent.

    A configured push refspec replaces push.default, so when the remote had
    none, ``HEAD`` is added first: plain `git push` then still pushes the
    current branch (to the branch of the same name). Fetch refspecs go to the
    staging namespace, so a diverged log never makes `git fetch` fail;
    `git wal fetch --offline` integrates what it brought.
    """
    name = resolve_remote(cwd, remote)
    changes = []
    wanted = {f"remote.{name}.push": push_refspecs(),
              f"remote.{name}.fetch": fetch_refspecs(name)}
    for key, values in wanted.items():
        have = _git(cwd, "config", "--get-all", key).stdout.splitlines()
        if key.endswith(".push") and (not have or "HEAD" in have):
            values = ["HEAD", *values]
        for value in values:
            if value in have:
                changes.append(ConfigChange(key, value, False))
                continue
            proc = _git(cwd, "config", "--add", key, value)
            if proc.returncode != 0:
                raise WalError(f"cannot set {key}: {_last_line(proc.stderr)}",
                               "check that the repository's config file is writable")
            changes.append(ConfigChange(key, value, True))
    return changes
