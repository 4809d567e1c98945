"""Secret-looking files: which untracked paths never enter a snapshot, an
``unlogged`` record, a file step's stored images, a checkpoint or a push
(docs/security.md "Secrets").

A pattern is a gitignore pattern. The defaults (:data:`DEFAULT_PATTERNS`) can
be turned off with ``git config wal.secretDefaults false``; ``git config --add
wal.secretPattern PATTERN`` adds one (a ``!PATTERN`` re-includes, as in
.gitignore). Only untracked files are affected: a file in the user's index is
in git already, and stays in snapshots.

Snapshots apply the patterns the way git applies ignore rules, through a
generated ``core.excludesFile`` (:func:`excludes_file`: the user's own global
excludes plus the patterns), so ``git add -A`` never reads such a file.
Because a repository's own ``.gitignore`` outranks that file (a ``!.env`` in
it would re-include ``.env``), the snapshot also drops, afterwards, every
untracked index entry the patterns match: among what ``git add -A -v``
reported adding (:func:`add_report`, matched with :func:`matcher`), or in
the whole scratch index when the patterns changed (:func:`untracked_matches`).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

import pygit2

from ..base.durable import atomic_write, makedirs_durable
from ..base.errors import WalError

# Private keys, certificates with keys, and the credential files of common
# tools. Each is a gitignore pattern; without a '/', it matches at any depth.
DEFAULT_PATTERNS: tuple[str, ...] = (
    ".env", ".env.*", ".envrc",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials",
    "credentials.json", "service-account*.json", ".htpasswd",
    "*.tfvars", "secrets.yml", "secrets.yaml",
)
PATTERN_KEY = "wal.secretPattern"
DEFAULTS_KEY = "wal.secretDefaults"
EXCLUDES_NAME = "secret-excludes"


def _config(repo: pygit2.Repository) -> pygit2.Config:
    return repo.config.snapshot()


def patterns(repo: pygit2.Repository) -> list[str]:
    """The secret patterns in force here: the defaults (unless off), then the configured."""
    cfg = _config(repo)
    try:
        defaults = cfg.get_bool(DEFAULTS_KEY)
    except (KeyError, pygit2.GitError, ValueError):
        defaults = True  # unset, or a value git cannot read: the safe side
    out = list(DEFAULT_PATTERNS) if defaults else []
    try:
        # str(): pygit2 yields str; its stubs before 1.21 say ConfigEntry
        out += [s for p in cfg.get_multivar(PATTERN_KEY) if (s := str(p).strip())]
    except (KeyError, pygit2.GitError):
        pass
    return out


def _global_excludes(repo: pygit2.Repository) -> bytes:
    """The user's own core.excludesFile (git's default: $XDG_CONFIG_HOME/git/ignore)."""
    cfg = _config(repo)
    try:
        path = os.path.expanduser(str(cfg["core.excludesFile"]))
    except (KeyError, pygit2.GitError):
        xdg = os.environ.get("XDG_CONFIG_HOME", "")
        base = Path(xdg) if xdg else Path.home() / ".config"
        path = str(base / "git" / "ignore")
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""  # git, too, ignores an excludes file it cannot read


def excludes_file(repo: pygit2.Repository, pats: list[str]) -> tuple[Path, bool]:
    """A file for ``-c core.excludesFile=``: the user's global excludes, then ``pats``.

    Rewritten (durably) only when its content would change, so a snapshot
    normally pays one read of it; the flag says it was (re)written: patterns
    changed, or the first snapshot since secrets were kept out, so a scratch
    index may hold entries they now match.
    """
    data = _global_excludes(repo)
    if data and not data.endswith(b"\n"):
        data += b"\n"
    data += b"# gitwal: secret patterns (docs/security.md)\n"
    data += "".join(f"{p}\n" for p in pats).encode()
    path = Path(repo.path) / "wal" / EXCLUDES_NAME
    try:
        if path.read_bytes() == data:
            return path, False
    except OSError:
        pass
    if not path.parent.is_dir():
        makedirs_durable(path.parent)
    atomic_write(path, data, 0o644, "sx")
    return path, True


def add_report(verbose: bytes) -> tuple[list[str], list[str]] | None:
    """The paths `git add -A -v` reports adding and removing (``add '<path>'``,
    ``remove '<path>'``, raw bytes), or None when a line does not parse (a name
    with a newline): then ask the index."""
    added: list[str] = []
    removed: list[str] = []
    for line in verbose.split(b"\n"):
        if not line:
            continue
        for verb, into in ((b"add '", added), (b"remove '", removed)):
            if line.startswith(verb) and line.endswith(b"'"):
                into.append(os.fsdecode(line[len(verb) : -1]))
                break
        else:
            return None
    return added, removed


def untracked_matches(root: Path, index: Path, pats: list[str],
                      gitdir: str | None = None) -> list[str]:
    """Entries of the scratch ``index`` the patterns match that the user's index lacks.

    Two cheap `git ls-files` calls (the second only when the first finds
    something): git's own pattern matching, so this agrees with the excludes file.
    """
    if not pats:
        return []
    env = _env(root, gitdir, index)
    args = ["git", "ls-files", "-z", "--cached", "--ignored"]
    for p in pats:
        args += ["--exclude", p]
    found = _run(args, root, env).split(b"\0")
    found = [p for p in found if p]
    if not found:
        return []
    names = [os.fsdecode(p) for p in found]
    known = tracked(root, names, gitdir)
    return [p for p in names if p not in known]


def tracked(root: Path, paths: list[str], gitdir: str | None = None) -> set[str]:
    """Which of ``paths`` the user's index holds (git's meaning of tracked)."""
    if not paths:
        return set()
    env = _env(root, gitdir, None)
    out = _run(["git", "--literal-pathspecs", "ls-files", "-z", "--cached", "--", *paths],
               root, env)
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


def withheld(repo: pygit2.Repository, root: Path, paths: Iterable[str]) -> tuple[str, ...]:
    """Which of a file step's ``paths`` the log keeps hashes of only: those the
    patterns match and the user's index lacks (docs/security.md "Secrets").
    One `git ls-files` only when a path matches."""
    match = matcher(patterns(repo))
    found = [p for p in paths if match(p)]
    known = tracked(root, found, repo.path)
    return tuple(p for p in found if p not in known)


def _env(root: Path, gitdir: str | None, index: Path | None) -> dict[str, str]:
    """git's environment for the repository gitwal opened: named explicitly
    when known (it may come from GIT_DIR/GIT_WORK_TREE, with no .git entry
    in the tree), else found from the tree as git would."""
    env = dict(os.environ)
    for key in ("GIT_INDEX_FILE", "GIT_DIR", "GIT_WORK_TREE"):
        env.pop(key, None)
    if gitdir is not None:
        env.update(GIT_DIR=gitdir, GIT_WORK_TREE=str(root))
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True)
    if proc.returncode != 0:
        raise WalError(
            f"could not list the snapshot's files: {os.fsdecode(proc.stderr).strip()}",
            "check that `git status` works in this repository")
    return proc.stdout


# -- matching in Python (log records, pushed trees): gitignore's rules ------


def _regex(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1:end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        elif c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def matcher(pats: Iterable[str]) -> Callable[[str], bool]:
    """``path -> True`` when git would ignore ``path`` under these patterns alone.

    A pattern without '/' (a trailing one aside) matches a name at any depth;
    one with '/' matches from the top; a trailing '/' matches directories
    only; the last matching pattern wins; a file under an ignored directory
    is ignored whatever later patterns say (as in git).
    """
    rules = _rules(tuple(pats))

    def ignored(rel: str, is_dir: bool) -> bool:
        hit = False
        name = rel.rsplit("/", 1)[-1]
        for rx, negate, dir_only, anchored in rules:
            if dir_only and not is_dir:
                continue
            if rx.match(rel if anchored else name):
                hit = not negate
        return hit

    def match(path: str) -> bool:
        parts = path.split("/")
        for i in range(1, len(parts)):
            if ignored("/".join(parts[:i]), True):
                return True
        return ignored(path, False)

    return match


# Compiled once per list of patterns: every file step asks (withheld()), and
# building the expressions cost more than the rest of a step's CPU.
@functools.lru_cache(maxsize=16)
def _rules(pats: tuple[str, ...]) -> tuple[tuple[re.Pattern[str], bool, bool, bool], ...]:
    rules: list[tuple[re.Pattern[str], bool, bool, bool]] = []
    for raw in pats:
        p = raw.rstrip()
        if not p or p.startswith("#"):
            continue
        negate = p.startswith("!")
        p = p[1:] if negate else p
        dir_only = p.endswith("/")
        p = p.rstrip("/")
        anchored = "/" in p
        try:
            rules.append((re.compile(_regex(p.lstrip("/")) + r"\Z"), negate, dir_only,
                          anchored))
        except re.error:
            continue  # git, too, ignores a pattern it cannot use
    return tuple(rules)
