"""The working tree: path confinement, content ids, atomic writes, snapshots.

Invariant: every path gitwal writes or removes has passed :meth:`Worktree.confine`
(relative, inside the tree, not under ``.git``, not through a symlink that
leaves the tree). The user's index is never read or written: snapshots use a
scratch index inside the git directory.
"""

from __future__ import annotations

import os
import posixpath
import stat
import subprocess
from pathlib import Path

import pygit2

from . import secrets
from .durable import (
    atomic_write,
    crash_point,
    fsync_dir,
    makedirs_durable,
    sync_filesystem,
    unlink_durable,
)
from .errors import PathRefused, WalError
from .ids import ABSENT, BlobId, TreeId

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_GITLINK = 0o160000


def tree_state(repo: pygit2.Repository, tree_id: str, path: str) -> str:
    """The object id ``path`` has in a tree, or ABSENT."""
    tree = repo[tree_id]
    assert isinstance(tree, pygit2.Tree)
    try:
        return str(tree[path].id)
    except KeyError:
        return ABSENT


def blob_id(data: bytes) -> BlobId:
    """The git object id of ``data`` as a blob (no write)."""
    return BlobId(str(pygit2.hash(data)))


class Worktree:
    def __init__(self, repo: pygit2.Repository) -> None:
        if repo.workdir is None:
            raise WalError(
                "this repository has no working tree (it is bare)",
                "run gitwal inside a clone with a working tree",
            )
        self.repo = repo
        self.root = Path(repo.workdir).resolve()

    # -- paths -------------------------------------------------------------

    def confine(self, path: str) -> str:
        """Return ``path`` as a normalised tree-relative POSIX path, or refuse it."""
        hint = "give a path relative to the top of the working tree, inside it"
        if not path or "\0" in path:
            raise PathRefused(f"refused path {path!r}: empty or contains NUL", hint)
        if os.path.isabs(path) or path.startswith("\\"):
            raise PathRefused(f"refused path {path!r}: absolute paths are not accepted", hint)
        parts = path.replace("\\", "/").split("/")
        if ".." in parts:
            raise PathRefused(f"refused path {path!r}: '..' may leave the working tree", hint)
        rel = posixpath.normpath("/".join(parts))
        if rel in (".", ""):
            raise PathRefused(f"refused path {path!r}: it names the tree itself", hint)
        if any(p.lower() == ".git" for p in rel.split("/")):
            raise PathRefused(
                f"refused path {path!r}: gitwal never writes inside .git", hint
            )
        full = self.root / rel
        for parent in Path(rel).parents:
            p = self.root / parent
            if p.exists() and not p.is_dir():
                raise PathRefused(
                    f"refused path {path!r}: {parent.as_posix()} is not a directory", hint
                )
        real_parent = Path(os.path.realpath(full.parent))
        if real_parent != self.root and self.root not in real_parent.parents:
            raise PathRefused(
                f"refused path {path!r}: it goes through a symlink that leaves the "
                "working tree",
                hint,
            )
        if full.is_symlink():
            raise PathRefused(
                f"refused path {path!r}: it is a symbolic link",
                "edit the file the link points to instead",
            )
        if full.is_dir():
            raise PathRefused(f"refused path {path!r}: it is a directory", hint)
        return rel

    def abspath(self, rel: str) -> Path:
        return self.root / rel

    # -- content -----------------------------------------------------------

    def read(self, rel: str) -> tuple[bytes | None, int]:
        """The file's bytes and git mode, or ``(None, 0)`` if absent."""
        full = self.root / rel
        try:
            st = full.lstat()
        except FileNotFoundError:
            return None, 0
        except NotADirectoryError:
            return None, 0
        if stat.S_ISLNK(st.st_mode):
            return os.readlink(full).encode(), MODE_LINK
        if not stat.S_ISREG(st.st_mode):
            raise PathRefused(f"{rel}: not a regular file")
        mode = MODE_EXEC if st.st_mode & 0o111 else MODE_FILE
        return full.read_bytes(), mode

    def state(self, rel: str) -> str:
        """The path's current object id, or ABSENT."""
        data, _ = self.read(rel)
        return ABSENT if data is None else blob_id(data)

    def write(self, rel: str, data: bytes, mode: int, tag: str) -> None:
        """Atomically set ``rel`` to ``data`` (creating parent dirs durably)."""
        full = self.root / rel
        if mode == MODE_LINK:
            self.remove(rel)
            os.symlink(data, full)
            fsync_dir(full.parent)
            return
        if not full.parent.is_dir():
            makedirs_durable(full.parent)
        atomic_write(full, data, 0o755 if mode == MODE_EXEC else 0o644, tag)

    def remove(self, rel: str) -> None:
        full = self.root / rel
        if full.is_symlink() or full.exists():
            unlink_durable(full)

    def set_state(self, rel: str, oid: str, mode: int, tag: str) -> None:
        """Put ``rel`` into the state ``oid`` (a blob in the odb, or ABSENT)."""
        if oid == ABSENT:
            self.remove(rel)
            return
        blob = self.repo[oid]
        assert isinstance(blob, pygit2.Blob)
        self.write(rel, blob.data, mode or MODE_FILE, tag)

    def clear_temp(self, rel: str, tag: str) -> bool:
        """Remove a temp file a killed atomic write of ``rel`` left behind."""
        tmp = (self.root / rel).with_name(f".{Path(rel).name}.{tag}.walt")
        if tmp.exists():
            unlink_durable(tmp)
            return True
        return False

    # -- whole-tree snapshots (exec steps) --------------------------------

    def snapshot(self, run: str) -> TreeId:
        """A tree of every tracked and untracked-but-not-ignored file, durable.

        Untracked files that match a secret pattern (gitwal/secrets.py) count
        as ignored: they never enter the tree, nor the object database.

        Call only while holding ``run``'s lock. The run's own scratch index
        (``.git/wal/index/<run>``, seeded from a copy of the user's index)
        keeps the stat cache between snapshots and leaves the user's index
        alone; because only the lock holder uses it, a leftover ``.lock`` is
        stale, and an index torn by a crash is only a lost cache: rebuilt.
        When it returns, the tree's objects and the working tree's files are
        on stable storage (one syncfs, not an fsync per object).
        """
        index = self._scratch_index(run)
        if not index.parent.is_dir():
            makedirs_durable(index.parent)
        user_index = Path(self.repo.path) / "index"
        if not index.exists() and user_index.exists():
            index.write_bytes(user_index.read_bytes())
        lock = index.with_name(index.name + ".lock")
        pats = secrets.patterns(self.repo)
        excludes, changed = secrets.excludes_file(self.repo, pats)
        try:
            tree = self._write_tree(index, lock, excludes, pats, changed)
        except WalError:
            index.unlink(missing_ok=True)  # torn or foreign: start from nothing
            tree = self._write_tree(index, lock, excludes, pats, changed)
        sync_filesystem(self.repo.path)
        if os.stat(self.repo.path).st_dev != os.stat(self.root).st_dev:
            sync_filesystem(self.root)
        return tree

    def _scratch_index(self, run: str) -> Path:
        return Path(self.repo.path) / "wal" / "index" / run

    def forget_snapshots(self, run: str) -> None:
        """Delete the run's scratch index (a cache; its shared part expires in git)."""
        index = self._scratch_index(run)
        index.unlink(missing_ok=True)
        index.with_name(index.name + ".lock").unlink(missing_ok=True)

    def _write_tree(self, index: Path, lock: Path, excludes: Path,
                    pats: list[str], recheck: bool) -> TreeId:
        lock.unlink(missing_ok=True)  # stale: we hold the run lock
        env = dict(os.environ, GIT_INDEX_FILE=str(index))
        env.pop("GIT_DIR", None)
        env.pop("GIT_WORK_TREE", None)
        def git(args: list[str], stdin: bytes | None = None) -> bytes:
            proc = subprocess.run(["git", *cfg, *args], cwd=self.root, env=env, input=stdin,
                                  capture_output=True)
            if proc.returncode != 0:
                raise WalError(
                    "could not snapshot the working tree: "
                    f"{os.fsdecode(proc.stderr).strip()}",
                    "check that `git status` works in this repository",
                )
            return proc.stdout

        # Each new loose object is fsynced before git links it into place, so
        # a crash never leaves a torn object that a later write would take for
        # present; the syncfs() after the snapshot makes the directory entries
        # durable. A split index: each snapshot rewrites only the entries that
        # changed, not the whole index (~100 bytes per file: 5 MB at 50k
        # files); git keeps the shared part in sharedindex.<id> in the git dir
        # and expires unused ones after two weeks. The excludes file holds the
        # user's own global excludes plus the secret patterns: git's ignore
        # rules, so untracked secrets are never read.
        cfg = ["-c", "core.fsync=loose-object", "-c", "core.fsyncMethod=fsync",
               "-c", "core.splitIndex=true", "-c", f"core.excludesFile={excludes}"]
        added = secrets.added_paths(git(["add", "-A", "-v", "--", "."]))
        # A repository's .gitignore outranks core.excludesFile (`!.env` in it
        # re-includes .env), and an index from an older snapshot may hold a
        # secret already: drop every untracked entry the patterns match. What
        # `add` just added is checked here (cheap); the whole index only when
        # the patterns changed or the output could not be parsed.
        if added is None or recheck:
            drop = secrets.untracked_matches(self.root, index, pats)
        else:
            match = secrets.matcher(pats)
            found = [p for p in added if match(p)]
            known = secrets.tracked(self.root, found)
            drop = [p for p in found if p not in known]
        if drop:
            git(["update-index", "-z", "--force-remove", "--stdin"],
                b"".join(os.fsencode(p) + b"\0" for p in drop))
        return TreeId(git(["write-tree"]).decode().strip())

    def changed_paths(self, old: TreeId, new: TreeId) -> list[str]:
        """Paths whose content or mode differs between two snapshots."""
        a, b = self.repo[old], self.repo[new]
        assert isinstance(a, pygit2.Tree) and isinstance(b, pygit2.Tree)
        diff = a.diff_to_tree(b)
        paths: set[str] = set()
        for delta in diff.deltas:
            paths.add(delta.old_file.path)
            paths.add(delta.new_file.path)
        return sorted(paths)

    def restore_paths(self, tree: TreeId, paths: list[str], tag: str) -> list[str]:
        """Put each path back to its state in ``tree``; returns paths touched."""
        t = self.repo[tree]
        assert isinstance(t, pygit2.Tree)
        done: list[str] = []
        for i, rel in enumerate(paths):
            if i == 1:
                crash_point("mid-restore")
            try:
                entry = t[rel]
            except KeyError:
                entry = None
            if entry is None:
                self.remove(rel)
            elif entry.filemode in (MODE_TREE, MODE_GITLINK):
                continue  # a directory or submodule: nothing of ours to write
            else:
                self.set_state(rel, str(entry.id), entry.filemode, tag)
            done.append(rel)
        return done
