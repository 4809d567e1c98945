"""The bytes on disk of a path, as a blob: a snapshot's own form.

git converts a file between the working tree and its blob: line endings
(``core.autocrlf``, the ``text``/``eol`` attributes), filters (Git LFS
stores a pointer), ``ident``, ``working-tree-encoding``. A snapshot is built
with ``git add`` into a scratch index (snapshot.py), so its blobs would hold
git's form, while every restore writes a blob's bytes as they are and every
comparison hashes what the file holds. So a snapshot's blob holds the bytes
on disk: after ``git add``, each regular file whose bytes differ from the
blob git made of them gets a blob of its own bytes in the snapshot's tree.
The scratch index keeps git's form (its stat cache stays git's).

Only a repository where git may convert pays for this (:func:`converts`):
``core.autocrlf`` true or input, or an attributes file anywhere (in the
tree, ``info/attributes``, ``core.attributesFile``, the system one). There,
each file of the tree is lstat'ed once per snapshot and read again only
when its stat data changed since the last snapshot of the same scratch
index (a cache beside the index, ``<index>.disk``, rebuilt when missing or
torn). Which ``.gitattributes`` files the tree holds is kept in that cache
too, updated from the tree difference, so a repository without any pays
one small tree diff per snapshot that changed something.

The other direction, for comparing a snapshot with an ordinary commit's
tree (a run's base commit, a checkpoint), is :func:`committed_form`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from ..base.durable import replace_cache
from ..base.ids import ABSENT, TreeId
from .byname import fsync_names

Reader = Callable[[str], tuple[bytes | None, int]]

_BLOB_MODES = (0o100644, 0o100755)
_TRUE = ("true", "yes", "on", "1", "input")
_RACY_NS = 1_000_000_000  # a coarse file system's timestamp resolution


def _autocrlf(repo: pygit2.Repository) -> bool:
    try:
        value = repo.config["core.autocrlf"]
    except (KeyError, pygit2.GitError, ValueError):
        return False
    return str(value).strip().lower() in _TRUE


def _attribute_files(repo: pygit2.Repository, common: Path) -> bool:
    """True when an attributes file outside the tree exists (and is not empty)."""
    candidates = [common / "info" / "attributes"]
    try:
        candidates.append(Path(os.path.expanduser(str(repo.config["core.attributesFile"]))))
    except (KeyError, pygit2.GitError, ValueError):
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        candidates.append(Path(xdg) / "git" / "attributes")
    if not os.environ.get("GIT_ATTR_NOSYSTEM"):
        candidates.append(Path("/etc/gitattributes"))
    for path in candidates:
        try:
            if path.stat().st_size > 0:
                return True
        except OSError:
            continue
    return False


def _attributes_in(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> list[str]:
    """Every ``.gitattributes`` path of ``tree`` (a walk of its directories)."""
    out: list[str] = []
    for entry in tree:
        if isinstance(entry, pygit2.Tree):
            out += _attributes_in(repo, entry, f"{prefix}{entry.name}/")
        elif entry.name == ".gitattributes":
            out.append(f"{prefix}{entry.name}")
    return out


class DiskForm:
    """One snapshot's pass from git's form to the bytes on disk (its cache
    lives beside the scratch index ``index``)."""

    def __init__(self, repo: pygit2.Repository, root: Path, common: Path, index: Path,
                 read: Reader) -> None:
        self.repo = repo
        self.root = root
        self.common = common
        self.cache_path = index.with_name(index.name + ".disk")
        self.read = read

    def _load(self) -> dict[str, object]:
        try:
            data = json.loads(self.cache_path.read_bytes())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _attributes(self, cache: dict[str, object], tree: pygit2.Tree) -> list[str]:
        """The tree's ``.gitattributes`` paths: the cached tree's, moved along the
        difference to ``tree``; a walk when nothing usable is cached."""
        old, known = cache.get("tree"), cache.get("attrs")
        if isinstance(old, str) and isinstance(known, list) and old == str(tree.id):
            return [p for p in known if isinstance(p, str)]
        before = self.repo.get(old) if isinstance(old, str) else None
        if not isinstance(before, pygit2.Tree) or not isinstance(known, list):
            return _attributes_in(self.repo, tree)
        have = {p for p in known if isinstance(p, str)}
        for delta in before.diff_to_tree(tree).deltas:
            for path in (delta.old_file.path, delta.new_file.path):
                if path.rsplit("/", 1)[-1] == ".gitattributes":
                    have.discard(path)
                    try:
                        if tree[path].filemode in _BLOB_MODES:
                            have.add(path)
                    except KeyError:
                        pass
        return sorted(have)

    def apply(self, tree: TreeId) -> tuple[TreeId, list[str]]:
        """The snapshot ``tree`` (git's form) with every regular file's blob
        holding the bytes on disk, and the paths whose bytes changed since
        the last pass while git's form did not (a line-ending-only edit: git
        does not report it, so the caller makes them durable by name).
        ``tree`` itself when git converts nothing here."""
        git_tree = self.repo[tree]
        assert isinstance(git_tree, pygit2.Tree)
        cache = self._load()
        attrs = self._attributes(cache, git_tree)
        files_in = cache.get("files")
        old_files = files_in if isinstance(files_in, dict) else {}
        if not (attrs or _autocrlf(self.repo) or _attribute_files(self.repo, self.common)):
            if cache.get("tree") != str(tree) or old_files:
                replace_cache(self.cache_path, json.dumps(
                    {"tree": str(tree), "attrs": attrs}).encode())
            return tree, []
        started = time.time_ns()
        stamp = cache.get("stamp")
        trusted_before = stamp - _RACY_NS if isinstance(stamp, int) else 0
        files: dict[str, list[object]] = {}
        override: dict[str, tuple[str, int]] = {}
        changed: list[str] = []
        top = os.fsencode(self.root) + b"/"
        for rel, oid, mode in _blobs(git_tree):
            try:
                st = os.lstat(top + os.fsencode(rel))
            except OSError:
                continue  # gone since git add: its blob stays git's
            if not stat.S_ISREG(st.st_mode):
                continue
            key: list[object] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, oid]
            got = old_files.get(rel)
            was: list[object] = got if isinstance(got, list) and len(got) == 6 else []
            known = bool(was)
            # Stat data proves nothing about a file written within the clock's
            # resolution of the last pass (git's "racy" entries): read again.
            if known and was[:5] == key and st.st_mtime_ns < trusted_before:
                raw = str(was[5])
            else:
                data, _mode = self.read(rel)
                if data is None:
                    continue
                raw = str(pygit2.hash(data))
                if raw != oid:
                    self.repo.create_blob(data)
                if known and raw != was[5] and raw != oid:
                    changed.append(rel)  # bytes git's form does not show changed
            files[rel] = [*key, raw]
            if raw != oid:
                override[rel] = (raw, mode)
        raw_tree = tree
        if override:
            digest = hashlib.sha1(json.dumps([str(tree), sorted(override.items())])
                                  .encode()).hexdigest()
            kept = cache.get("raw")
            if (isinstance(kept, list) and len(kept) == 2 and kept[0] == digest
                    and isinstance(self.repo.get(str(kept[1])), pygit2.Tree)):
                raw_tree = TreeId(str(kept[1]))  # the same tree as the last pass made
            else:
                raw_tree = self._rewrite(git_tree, override, started)
        replace_cache(self.cache_path, json.dumps(
            {"tree": str(tree), "attrs": attrs, "stamp": started, "files": files,
             "raw": [digest, str(raw_tree)] if override else None}).encode())
        return raw_tree, changed

    def _rewrite(self, git_tree: pygit2.Tree, override: dict[str, tuple[str, int]],
                 started: int) -> TreeId:
        """``git_tree`` with the blobs of ``override``, its new objects durable
        (those written since ``started``: libgit2 writes no object it has)."""
        index = pygit2.Index()
        index.read_tree(git_tree)
        for rel, (oid, mode) in override.items():
            index.add(pygit2.IndexEntry(rel, pygit2.Oid(hex=oid), FileMode(mode)))
        new = TreeId(str(index.write_tree(self.repo)))
        # libgit2 does not fsync the objects it writes: the blobs and every
        # tree on the way to them, by name, as git does for its own.
        root = self.repo[new]
        assert isinstance(root, pygit2.Tree)
        oids = {str(new)}
        for rel, (oid, _mode) in override.items():
            oids.add(oid)
            parts = rel.split("/")
            for i in range(1, len(parts)):
                oids.add(str(root["/".join(parts[:i])].id))
        objects = self.common / "objects"
        loose = []
        for o in sorted(oids):
            try:
                if os.stat(objects / o[:2] / o[2:]).st_ctime_ns >= started - _RACY_NS:
                    loose.append(f"{o[:2]}/{o[2:]}")
            except OSError:
                continue  # packed: durable already
        if loose:
            fsync_names(objects, loose)
        return new


def _blobs(tree: pygit2.Tree, prefix: str = "") -> list[tuple[str, str, int]]:
    """(path, blob id, mode) of every regular file of ``tree``."""
    out: list[tuple[str, str, int]] = []
    for entry in tree:
        if isinstance(entry, pygit2.Tree):
            out += _blobs(entry, f"{prefix}{entry.name}/")
        elif entry.filemode in _BLOB_MODES:
            out.append((f"{prefix}{entry.name}", str(entry.id), entry.filemode))
    return out


def committed_form(repo: pygit2.Repository, path: str, data: bytes) -> str:
    """The blob id git would commit for ``data`` at ``path``: its clean filters
    and line-ending conversion applied, as ``git add`` does, with the
    attributes of the working tree (of ``info/attributes`` and the global
    files only, in a bare repository); nothing is written."""
    env = dict(os.environ, GIT_DIR=repo.path)
    cwd = repo.path
    if repo.workdir is not None:
        env["GIT_WORK_TREE"] = cwd = repo.workdir
    proc = subprocess.run(["git", "hash-object", f"--path={path}", "--stdin"], cwd=cwd,
                          env=env, input=data, capture_output=True)
    if proc.returncode != 0:
        return str(pygit2.hash(data))
    return proc.stdout.decode().strip()


class CommittedForms:
    """Whether a state an ordinary commit's tree holds (git's form: a base
    commit, a checkpoint, a branch) is the same content as a state the log
    holds (the bytes on disk). Asked only where the two ids differ, so a
    repository git converts nothing in never runs git here."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self._seen: dict[tuple[str, str], str] = {}

    def same(self, path: str, committed: str, disk: str) -> bool:
        if committed == disk:
            return True
        if ABSENT in (committed, disk):  # a file on one side only: no form makes them one
            return False
        key = (path, disk)
        if key not in self._seen:
            blob = self.repo.get(disk)
            self._seen[key] = (committed_form(self.repo, path, blob.data)
                               if isinstance(blob, pygit2.Blob) else disk)
        return self._seen[key] == committed
