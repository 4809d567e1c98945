"""Whole-tree snapshots of shell steps: a tree of every tracked and
untracked-but-not-ignored file, written through a scratch index, never the
user's (``.git/wal/index/<run>``); the paths two snapshots differ in. What
a path holds in a tree is treeread.py.

Mixed into :class:`gitwal.worktree.tree.Worktree`, so a caller writes
``wt.snapshot(run)``. Untracked secret-looking files (secrets.py) never enter
a snapshot, nor the object database.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pygit2

from ..base import progress
from ..base.durable import makedirs_durable, sync_filesystem
from ..base.errors import WalError
from ..base.ids import TreeId
from ..base.repository import common_dir
from ..records.model import Intent
from . import secrets
from .byname import fsync_names
from .diskform import DiskForm

CHECK = "check"  # the scratch index of the hook server's background tree check


class Snapshots:
    """Mixed into :class:`gitwal.worktree.tree.Worktree`, which provides these."""

    repo: pygit2.Repository
    root: Path
    # The trees git itself made of this process's snapshots (diskform.py):
    # snapshot tree -> the tree ``git add`` wrote (equal where git converts nothing).
    committed_forms: dict[TreeId, TreeId]

    def read(self, rel: str) -> tuple[bytes | None, int]:
        raise NotImplementedError  # the working tree's confined reader (tree.py)

    def snapshot(self, run: str, watch: Sequence[str] = (), scratch: str = "") -> TreeId:
        """A tree of every tracked and untracked-but-not-ignored file, durable.

        ``watch``: tree-relative paths whose ignored files are included too
        (``git wal exec --watch``), so a step that changes them is seen. Such
        a snapshot uses a scratch index of its own, so the paths do not widen
        the run's other snapshots.

        Untracked files that match a secret pattern (gitwal/worktree/secrets.py) count
        as ignored: they never enter the tree, nor the object database.

        Call only while holding ``run``'s lock. The run's own scratch index
        (``.git/wal/index/<run>``, seeded from a copy of the user's index)
        keeps the stat cache between snapshots and leaves the user's index
        alone; because only the lock holder uses it, a leftover ``.lock`` is
        stale, and an index torn by a crash is only a lost cache: rebuilt.
        When it returns, the tree's objects and the working tree's files are
        on stable storage: git fsyncs each new loose object as it writes it,
        and every path this snapshot found changed since the index's last one
        (``git add -v`` names them) is fsynced by name with the directories
        whose entries it changed, as are the object directories that gained
        this tree's objects (:meth:`_make_durable`). A syncfs follows as an
        extra; it is never the barrier (a no-op on FUSE mounts).

        ``scratch`` names another scratch index, for a snapshot taken without
        the run's lock (the hook server's background check): its caller holds
        that index's own lock instead (:meth:`scratch_lock`).
        """
        index = self._scratch_index(run)
        if scratch:
            index = index.with_name(f"{index.name}.{scratch}")
        elif watch:
            key = hashlib.sha1("\0".join(sorted(watch)).encode()).hexdigest()[:12]
            index = index.with_name(f"{index.name}.watch-{key}")
        if not index.parent.is_dir():
            makedirs_durable(index.parent)
        user_index = Path(self.repo.path) / "index"
        if not index.exists() and user_index.exists():
            index.write_bytes(user_index.read_bytes())
        lock = index.with_name(index.name + ".lock")
        pats = secrets.patterns(self.repo)
        excludes, changed = secrets.excludes_file(self.repo, pats)
        try:
            with progress.status("snapshotting the working tree", tick=True):
                tree, moved = self._write_tree(index, lock, excludes, pats, changed, watch)
        except WalError:
            index.unlink(missing_ok=True)  # torn or foreign: start from nothing
            tree, moved = self._write_tree(index, lock, excludes, pats, changed, watch)
        # The snapshot holds the bytes on disk, not git's converted form (diskform.py).
        committed = tree
        tree, reread = DiskForm(self.repo, self.root, common_dir(self.repo), index,
                                self.read).apply(tree)
        if moved is not None and reread:
            moved = sorted({*moved, *reread})
        self.committed_forms[tree] = committed
        self._make_durable(tree, moved)
        sync_filesystem(self.repo.path)
        if os.stat(self.repo.path).st_dev != os.stat(self.root).st_dev:
            sync_filesystem(self.root)
        return tree

    def settle(self, paths: Sequence[str]) -> None:
        """Make what ``paths`` hold now durable, by name, before a record says
        so: another program wrote them (an agent's Edit, which need not
        fsync), or a killed step's write may lack its directory's fsync
        (docs/crash-safety.md, "The barrier behind each record")."""
        fsync_names(self.root, paths)

    def _make_durable(self, tree: TreeId, moved: list[str] | None) -> None:
        """fsync by name what this snapshot took in: the paths ``moved`` (all of
        the tree's when None: git's report did not parse), their directories,
        and the object directories holding the tree's new loose objects.

        Why by name: git fsyncs a loose object's file but not the directory
        entry it links, and a shell command's files are fsynced by nobody; a
        record may name both only once they are on stable storage, whatever
        the file system (syncfs reaches no FUSE daemon)."""
        root = self.repo[tree]
        assert isinstance(root, pygit2.Tree)
        paths = _all_paths(root) if moved is None else moved
        fsync_names(self.root, paths)
        oids = {str(root.id)}
        for rel in paths:
            parts = rel.split("/")
            for i in range(1, len(parts) + 1):  # each directory on the way, then the blob
                try:
                    oids.add(str(root["/".join(parts[:i])].id))
                except KeyError:
                    break  # removed (or a secret left out): nothing new to hold
        objects = common_dir(self.repo) / "objects"
        fanout = sorted({o[:2] for o in oids if (objects / o[:2] / o[2:]).exists()})
        if fanout:
            fsync_names(objects, fanout)

    def _scratch_index(self, run: str) -> Path:
        return Path(self.repo.path) / "wal" / "index" / run

    @contextmanager
    def scratch_lock(self, run: str, scratch: str) -> Iterator[bool]:
        """Hold the lock of ``run``'s scratch index ``scratch`` if no other
        process or thread does (True), else yield False at once."""
        index = self._scratch_index(run)
        if not index.parent.is_dir():
            makedirs_durable(index.parent)
        fd = os.open(index.with_name(f"{index.name}.{scratch}.flock"),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def forget_snapshots(self, run: str) -> None:
        """Delete the run's scratch indexes (caches; shared parts expire in git)."""
        index = self._scratch_index(run)
        check = index.with_name(f"{index.name}.{CHECK}")
        for path in [index, check, *index.parent.glob(f"{index.name}.watch-*")]:
            path.unlink(missing_ok=True)
            path.with_name(path.name + ".lock").unlink(missing_ok=True)

    def _write_tree(self, index: Path, lock: Path, excludes: Path, pats: list[str],
                    recheck: bool, watch: Sequence[str] = ()
                    ) -> tuple[TreeId, list[str] | None]:
        """The snapshot's tree, and the paths whose index entries it added or
        removed (None when git's report did not parse)."""
        lock.unlink(missing_ok=True)  # stale: we hold the run lock
        # The repository and tree gitwal opened, named explicitly: they may come
        # from GIT_DIR/GIT_WORK_TREE with no .git entry in the tree to find.
        env = dict(os.environ, GIT_INDEX_FILE=str(index), GIT_DIR=self.repo.path,
                   GIT_WORK_TREE=str(self.root))
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
        # present; the fsyncs by name after the snapshot (_make_durable) make
        # the directory entries durable. A split index: each snapshot rewrites only the entries that
        # changed, not the whole index (~100 bytes per file: 5 MB at 50k
        # files); git keeps the shared part in sharedindex.<id> in the git dir
        # and expires unused ones after two weeks. The excludes file holds the
        # user's own global excludes plus the secret patterns: git's ignore
        # rules, so untracked secrets are never read.
        cfg = ["-c", "core.fsync=loose-object", "-c", "core.fsyncMethod=fsync",
               "-c", "core.splitIndex=true", "-c", f"core.excludesFile={excludes}"]
        report = secrets.add_report(git(["add", "-A", "-v", "--", "."]))
        present = [w for w in watch if os.path.lexists(self.root / w)]
        # A watched secret-looking file is never read into git (its rollback
        # is held in memory: secretfiles.py).
        hidden = set(secrets.withheld(self.repo, self.root, present)) if present else set()
        present = [w for w in present if w not in hidden]
        if present:
            # Ignored files under the watched paths too (-f). Never without a
            # pathspec: that would force-add every ignored file of the tree.
            # Entries whose files are gone were removed by `add -A` above.
            more = secrets.add_report(git(["add", "-A", "-f", "-v", "--", *present]))
            report = (None if report is None or more is None
                      else (report[0] + more[0], report[1] + more[1]))
        added = None if report is None else report[0]
        # A repository's .gitignore outranks core.excludesFile (`!.env` in it
        # re-includes .env), and an index from an older snapshot may hold a
        # secret already: drop every untracked entry the patterns match. What
        # `add` just added is checked here (cheap); the whole index only when
        # the patterns changed or the output could not be parsed.
        if added is None or recheck:
            drop = secrets.untracked_matches(self.root, index, pats, self.repo.path)
        else:
            match = secrets.matcher(pats)
            found = [p for p in added if match(p)]
            known = secrets.tracked(self.root, found, self.repo.path)
            drop = [p for p in found if p not in known]
        if drop:
            git(["update-index", "-z", "--force-remove", "--stdin"],
                b"".join(os.fsencode(p) + b"\0" for p in drop))
        moved = None if report is None else report[0] + report[1]
        return TreeId(git(["write-tree"]).decode().strip()), moved

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


def _all_paths(tree: pygit2.Tree, prefix: str = "") -> list[str]:
    """Every blob path of ``tree`` (the fallback when git's report did not parse)."""
    out: list[str] = []
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if isinstance(entry, pygit2.Tree):
            out += _all_paths(entry, f"{path}/")
        else:
            out.append(path)
    return out


def watched_paths(intent: Intent) -> list[str]:
    """The paths an exec intent's snapshots include ignored files of."""
    watch = intent.args.get("watch", [])
    return [w for w in watch if isinstance(w, str)] if isinstance(watch, list) else []
