"""What the log expects the working tree to be, and what a look at it finds.

The expectation is the ledger (gitwal/changes/ledger.py) with ``unlogged`` records
counted: since the newest checkpoint, every committed step gives its targets
their (observed) post-image, an exec step every path its post tree changed,
and an ``unlogged`` record the states it found; any other path is expected as
in the segment's base tree. Whatever differs when a hook looks becomes an
``unlogged`` record (no silent gap), naming the blobs found so ``git gc``
keeps them. Nothing here writes the working tree: the agent owns its effects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pygit2

from ..base.display import safe
from ..base.errors import PathRefused, WalError
from ..base.ids import ABSENT, Lsn, TreeId
from ..changes.ledger import EXPLAINED, Ledger, LedgerCache
from ..log.store import Ref
from ..records.model import Abort, Commit, Intent, Record, Unlogged
from ..run import Run
from ..together.shell_among import among, left_by_others
from ..worktree import secrets
from ..worktree.diskform import CommittedForms
from ..worktree.tree import MODE_GITLINK, MODE_TREE, blob_id
from ..worktree.treeread import tree_state

# The hook server's calls continue the ledger of their last call.
LEDGERS = LedgerCache()


@dataclass(frozen=True)
class Staged:
    """A record a look at the tree wants appended, and the objects it names (the
    append keeps them reachable). The caller appends it; nothing here does."""

    record: Record
    refs: tuple[Ref, ...] = ()


def _next_lsn(records: Sequence[Record]) -> Lsn:
    return Lsn(records[-1].lsn + 1)


def _refuse_undecodable(paths: Sequence[str]) -> None:
    """A record names paths as UTF-8 JSON strings: a name that is not UTF-8 cannot be
    recorded, and leaving it out would be a silent gap, so the call is refused."""
    for path in paths:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise PathRefused(
                f"the file name {safe(path)} is not valid UTF-8: the log records names as "
                "UTF-8, so this change cannot be recorded",
                "rename it to a UTF-8 name (`git status` lists it), then retry; nothing was "
                "recorded for this call") from None


class Expectation:
    """The log's expectation of one run's tree, and the records that close gaps."""

    def __init__(self, run: Run, full_check: bool = True) -> None:
        self.run_id = run.id
        self.store = run.store
        self.wt = run.wt
        self.repo: pygit2.Repository = run.store.repo
        self.full_check = full_check  # compare the whole tree, not only known paths
        self._secret: Callable[[str], bool] | None = None  # built on first use

    def ledger(self, records: list[Record]) -> Ledger:
        """What the log expects since the newest checkpoint (ledger.py, EXPLAINED):
        committed steps' (observed) posts, exec steps' changed paths, and the
        states ``unlogged`` records found; other paths as in the base tree."""
        return LEDGERS.fold(self.wt, self.run_id, records, EXPLAINED)

    def notice(self, records: Sequence[Record], noticed: str, paths: Sequence[str] = (),
               snapshot: TreeId | None = None) -> list[Staged]:
        """An ``unlogged`` record for whatever differs from the expectation of
        ``records`` (the segment with what the caller is about to append after
        it; the record takes the next LSN), or nothing when all is as expected.

        Checks the paths the log knows and ``paths`` by reading them; with a
        snapshot (or ``full_check``), every path of the tree as well.
        """
        ledger = self.ledger(list(records))
        expect = ledger.expected()
        base = ledger.require_base()
        if snapshot is None and self.full_check:
            snapshot = self.wt.snapshot(self.run_id)
        found: dict[str, tuple[str, str, list[Ref]]] = {}
        # The base tree is git's form; the log's states and the tree's bytes
        # are what files hold on disk (worktree/diskform.py).
        forms = CommittedForms(self.repo)
        for path in self._not_secret(sorted({*expect, *paths}), base, snapshot):
            want = expect.get(path)
            committed = want is None
            if want is None:
                want = tree_state(self.repo, base, path)
            have, refs = self.peek(path, want)
            if have != want and not (committed and forms.same(path, want, have)):
                found[path] = (want, have, refs)
        if snapshot is not None:
            tree = self.repo[snapshot]
            assert isinstance(tree, pygit2.Tree)
            git_form = self.wt.committed_forms.get(snapshot, snapshot)
            for path in self.wt.changed_paths(base, git_form):
                if path in found or path in expect:
                    continue
                try:
                    entry = tree[path]
                except KeyError:
                    entry = None
                if entry is not None and entry.filemode in (MODE_TREE, MODE_GITLINK):
                    continue
                have = ABSENT if entry is None else str(entry.id)
                want = tree_state(self.repo, base, path)
                if not forms.same(path, want, have):
                    found[path] = (want, have, [] if have == ABSENT else [Ref(have)])
        if not found:
            return []
        paths_ = sorted(found)
        _refuse_undecodable(paths_)
        # Another run's logged step is not an unlogged edit: named, so readers
        # (the Stop rule, `git wal log`, verify) tell the two apart.
        theirs = left_by_others(self.repo, self.run_id, {p: found[p][1] for p in paths_})
        return [Staged(Unlogged(
            self.run_id, _next_lsn(records), tuple(paths_),
            tuple(found[p][0] for p in paths_), tuple(found[p][1] for p in paths_), noticed,
            theirs,
        ), tuple(r for p in paths_ for r in found[p][2]))]

    def _not_secret(self, paths: list[str], base: TreeId,
                    snapshot: TreeId | None) -> list[str]:
        """``paths`` without the untracked secret-looking ones (gitwal/worktree/secrets.py).

        Their content is never read into the log: such a path is tracked when
        the base tree has it, or the snapshot does (a snapshot holds it only
        when the user's index does), or, without a snapshot, the index does.
        """
        if self._secret is None:
            self._secret = secrets.matcher(secrets.patterns(self.repo))
        out, unsure = [], []
        for path in paths:
            if not self._secret(path) or tree_state(self.repo, base, path) != ABSENT:
                out.append(path)
            elif snapshot is not None:
                if tree_state(self.repo, snapshot, path) != ABSENT:
                    out.append(path)
            else:
                unsure.append(path)
        known = secrets.tracked(self.wt.root, unsure, self.wt.repo.path)
        return sorted(out + [p for p in unsure if p in known])

    def peek(self, path: str, want: str, store: bool = True) -> tuple[str, list[Ref]]:
        """State of ``path``; its blob is written only when it differs from
        ``want``, and never unless ``store`` (a withheld image: its id only).

        One read per path: this runs for every path the log knows at every hook.
        """
        try:
            data, _ = self.wt.read(path)
        except WalError:  # a directory or a special file now: not a file state
            data = None
        have = ABSENT if data is None else blob_id(data)
        if have == want or data is None or not store:
            return have, []
        oid = self.store.put_blob(data)
        return oid, [Ref(oid)]

    def settle(self, records: Sequence[Record], intent: Intent, why: str) -> list[Staged]:
        """What closes ``intent`` (open at the end of ``records``) from what the
        tree shows, and an ``unlogged`` record of what differs; never writes the tree."""
        lsn = _next_lsn(records)
        if intent.tool == "exec":
            snap = self.wt.snapshot(self.run_id)
            changed = self.wt.changed_paths(TreeId(intent.pre[0]), snap)
            if not changed:
                return [Staged(Abort(self.run_id, lsn, intent.lsn, f"not applied: {why}"))]
            theirs, claimed = among(self.repo, self.run_id, intent, snap)
            abort = Staged(Abort(self.run_id, lsn, intent.lsn,
                                 f"{why}; {len(changed)} path(s) changed since its pre tree, "
                                 "recorded as unlogged (not verified)", theirs=theirs,
                                 claimed=claimed),
                           (Ref(snap, is_tree=True),))
            return [abort, *self.notice([*records, abort.record],
                                        f"settling LSN {intent.lsn}: {why}", snapshot=snap)]
        assert intent.post is not None
        now = tuple(self.wt.state(p) for p in intent.target)
        if now == intent.post:
            self.wt.settle(intent.target)
            return [Staged(Commit(self.run_id, lsn, intent.lsn, now,
                                  f"hash==post (settled: {why})", recovered=True))]
        if now == intent.pre:
            return [Staged(Abort(self.run_id, lsn, intent.lsn, f"not applied: {why}"))]
        abort = Staged(Abort(self.run_id, lsn, intent.lsn,
                             f"{why}; found neither the pre- nor the post-image, left as "
                             "found and recorded as unlogged"))
        return [abort, *self.notice([*records, abort.record],
                                    f"settling LSN {intent.lsn}: {why}", intent.target)]
