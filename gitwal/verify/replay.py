"""The intent check of `git wal verify`: re-derive what the records claim.

A file tool's post ids follow from its pre-images and args; a commit's post
equals its intent's; an abort restores only what its intent targets. Steps
that built on a change made outside the log are noted (:func:`drift_notes`).
Also the pieces the other checks share: :class:`TreeView`, :func:`short`,
:func:`intents_of`.

The closing check is in verify/closing.py, the objects check in
verify/objects.py, the checkpoint checks in verify/checkpoints.py. All of
them read git objects only (no working tree), so they run in a bare mirror
as well as in a clone. Each returns failures; none raises on a bad log.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pygit2

from ..base.errors import WalError
from ..base.ids import ABSENT, UNKNOWN
from ..changes import tools
from ..changes.ledger import EXEC, Fold, Ledger, Rules
from ..log.segments import Entry, Failure
from ..records.model import (
    AGENT_ARG,
    MISS,
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Abort,
    Commit,
    Intent,
    is_miss,
    unpredicted,
)
from ..worktree.tree import MODE_TREE, Worktree, blob_id
from ..worktree.treeread import tree_state

MAX_PATHS = 20  # per checkpoint: past this, one line says how many more


class TreeView(Worktree):
    """The part of a Worktree that only diffs trees, for a repository without one.

    The ledger (gitwal/changes/ledger.py) takes a Worktree but uses it only to diff
    exec snapshots; a bare mirror (CI) has no working tree, and
    ``Worktree.__init__`` refuses it. Nothing here touches files.
    """

    def __init__(self, repo: pygit2.Repository) -> None:  # no super(): no tree to find
        self.repo = repo
        self.root = Path(repo.path)
        self.committed_forms = {}


def short(oid: str) -> str:
    return oid if oid == ABSENT else oid[:12]


def intents_of(history: Iterable[Entry]) -> dict[int, Intent]:
    return {e.record.lsn: e.record for e in history if isinstance(e.record, Intent)}


# -- intents ---------------------------------------------------------------


def _blob(repo: pygit2.Repository, oid: str) -> bytes | None:
    obj = repo.get(oid)
    return obj.data if isinstance(obj, pygit2.Blob) else None


def intent_problems(repo: pygit2.Repository, run: str, i: Intent) -> list[str]:
    """Why ``i`` is not what gitwal would have logged (empty: it is)."""
    label = f"intent LSN {i.lsn} ({i.tool} {' '.join(i.target)})"
    problems: list[str] = []
    if i.key != f"{run}:{i.lsn}":
        problems.append(f"{label}: key {i.key!r} is not {run}:{i.lsn}")
    if i.tool == "exec":
        if i.target != (".",) or i.mode != (MODE_TREE,) or i.pre[0] == ABSENT:
            problems.append(f"{label}: an exec intent targets '.' with one pre tree")
        return problems
    if i.tool == "write_files":
        return problems + _write_files_problems(label, i)
    if i.tool in tools.RESTORING_TOOLS:
        return problems + _restoring_problems(label, i)
    spec = tools.TOOLS.get(i.tool)
    if spec is None:
        return [*problems, f"{label}: unknown tool {i.tool!r}"]
    assert i.post is not None  # decode guarantees a post list for every file tool
    paths = tuple(i.args.get(name) for name in spec.path_args)
    if paths != i.target:
        problems.append(f"{label}: target {list(i.target)} does not match the path "
                        f"arguments {list(paths)}")
        if len(paths) != len(i.target):
            return problems  # the tool would be fed the wrong number of pre-images
    if i.replay != REPLAY_SAFE:
        problems.append(f"{label}: file tools are replay-safe, the record says {i.replay!r}")
    for path, pre, mode in zip(i.target, i.pre, i.mode, strict=True):
        if (pre == ABSENT) != (mode == 0):
            problems.append(f"{label}: {path} has mode {mode:o} but pre {short(pre)}")
    if i.tool == "write_file":
        content = i.args.get("content")
        if content != i.post[0] or content == ABSENT:
            problems.append(f"{label}: args.content {content!r} is not the post-image "
                            f"{short(i.post[0])}")
        return problems
    pre_data: list[bytes | None] = []
    for pre in i.pre:
        data = None if pre == ABSENT else _blob(repo, pre)
        if pre != ABSENT and data is None:
            return problems  # the objects check names the missing pre-image
        pre_data.append(data)
    try:
        post = spec.apply(tuple(pre_data), i.args)
    except WalError as e:
        return [*problems, f"{label}: the tool refuses its recorded args on the recorded "
                           f"pre-image ({e.message}); gitwal never logs such a step"]
    except (TypeError, ValueError) as e:
        # The tools check the arguments gitwal passes them; a hand-written record
        # can hold anything (a list where a string goes, say).
        return [*problems, f"{label}: the tool cannot run on its recorded args ({e})"]
    got = tuple(ABSENT if d is None else blob_id(d) for d in post)
    for path, want, have in zip(i.target, i.post, got, strict=True):
        if want != have:
            problems.append(f"{label}: replaying {i.tool} on the recorded pre-image gives "
                            f"{path} = {short(have)}, the intent records {short(want)} "
                            "(args, pre or post edited)")
    return problems


def _named_states(label: str, i: Intent) -> list[str]:
    """A multi-path intent whose args name its states (write_files, undo, redo):
    ``paths`` is the target, ``contents`` the post, and modes match the pre."""
    problems: list[str] = []
    if i.args.get("paths") != list(i.target):
        problems.append(f"{label}: args.paths {i.args.get('paths')!r} is not the target")
    if i.args.get("contents") != list(i.post or ()):
        problems.append(f"{label}: args.contents is not the post-images")
    for path, pre, mode in zip(i.target, i.pre, i.mode, strict=True):
        if (pre == ABSENT) != (mode == 0):
            problems.append(f"{label}: {path} has mode {mode:o} but pre {short(pre)}")
    return problems


def _restoring_problems(label: str, i: Intent) -> list[str]:
    """An undo or redo (docs/undo.md): it writes exactly the states its args name."""
    problems = _named_states(label, i)
    if i.replay != REPLAY_SAFE:
        problems.append(f"{label}: an {i.tool} is replay-safe, the record says {i.replay!r}")
    return problems


def _write_files_problems(label: str, i: Intent) -> list[str]:
    """An agent hook's multi-file end state (docs/format.md): the args name it."""
    problems = _named_states(label, i)
    if not isinstance(i.args.get(AGENT_ARG), dict):
        problems.append(f"{label}: write_files is written by agent hooks only, and this "
                        f"intent has no args.{AGENT_ARG}")
    if unpredicted(i):
        if set(i.post or ()) != {UNKNOWN} or i.replay != REPLAY_UNSAFE:
            problems.append(f"{label}: a step whose post was not predicted has every post "
                            f"{UNKNOWN!r} and is never replayed")
    elif i.replay != REPLAY_SAFE:
        problems.append(f"{label}: file tools are replay-safe, the record says {i.replay!r}")
    return problems


def _prediction_miss(i: Intent, c: Commit) -> bool:
    """An agent step whose tool wrote other bytes than predicted: the commit
    records what was observed and says so (docs/agents.md)."""
    return isinstance(i.args.get(AGENT_ARG), dict) and c.verified.startswith(MISS)


def intent_failures(repo: pygit2.Repository, run: str, history: list[Entry]) -> list[Failure]:
    """Every intent replays; a commit's post equals its file intent's post."""
    out: list[Failure] = []
    intents = intents_of(history)
    for e in history:
        r = e.record
        if isinstance(r, Intent):
            out += [Failure(run, "intent", p, r.lsn) for p in intent_problems(repo, run, r)]
        elif isinstance(r, Commit) and (i := intents.get(r.intent)) is not None:
            if i.tool == "exec":
                if len(r.post) != 1 or r.post[0] == ABSENT:
                    out.append(Failure(run, "intent", f"commit LSN {r.lsn} of exec intent "
                                       f"{i.lsn} must name one post tree", r.lsn))
            elif is_miss(i, r) and not (
                    len(r.post) == len(i.target) and _prediction_miss(i, r)):
                got = ", ".join(f"{p} = {short(x)}" for p, x in zip(i.target, r.post,
                                                                     strict=False))
                want = ", ".join(short(x) for x in i.post or ())
                out.append(Failure(run, "intent", f"commit LSN {r.lsn} records {got}, but "
                                   f"intent LSN {i.lsn} expects {want}", r.lsn))
        elif isinstance(r, Abort) and (i := intents.get(r.intent)) is not None:
            stray = set(r.restored) - set(i.target)
            if i.tool != "exec" and stray:
                out.append(Failure(run, "intent", f"abort LSN {r.lsn} restored "
                                   f"{sorted(stray)}, which intent LSN {i.lsn} does not "
                                   "target", r.lsn))
    return out


def drift_notes(repo: pygit2.Repository, history: list[Entry], limit: int = 10) -> list[str]:
    """File intents whose pre-image is not the state the log last gave the path.

    Such a step built on a change made outside the log (an edit between two
    steps). Its result is then "explained" by the step, so neither
    `git wal checkpoint` nor the branch check calls it unlogged: these notes
    are the only trace. Paths the log has given no state yet are skipped (a
    run may begin on a dirty tree).
    """
    trees = TreeView(repo)
    first = history[0].record if history else None
    # Committed steps only (docs/verify.md), starting over at each checkpoint.
    ledger = Fold(trees, Ledger.start(repo, first, Rules(lenient=True)))
    out: list[str] = []
    for e in history:
        r = e.record
        if isinstance(r, Intent) and r.tool != "exec":
            for path, pre in zip(r.target, r.pre, strict=True):
                last = _last_given(repo, ledger, path)
                if last is not None and last[0] != pre:
                    out.append(f"LSN {r.lsn} ({r.tool}) began with {path} = {short(pre)}, "
                               f"not {short(last[0])} as {last[1]} left it: changed outside "
                               "the log in between, and the step built on it")
        ledger.feed(r)
    if len(out) > limit:
        out[limit:] = [f"... and {len(out) - limit} more step(s) that built on such changes"]
    return out


def _last_given(repo: pygit2.Repository, ledger: Fold, path: str) -> tuple[str, str] | None:
    """(state, which record left it) the log last gave ``path``: a committed
    step, else the newest checkpoint's tree; None before the first checkpoint."""
    held = ledger.held.get(path)
    if held is not None:
        return held.state, f"{'exec ' if held.source == EXEC else ''}LSN {held.lsn}"
    if ledger.checkpoint is not None and ledger.base is not None:
        return tree_state(repo, ledger.base, path), f"checkpoint LSN {ledger.checkpoint}"
    return None
