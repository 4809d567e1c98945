"""The checks of `git wal verify` that re-derive what the records claim.

* closing: every commit/abort closes an earlier, open intent, once;
* intents: a file tool's post ids follow from its pre-images and args;
* objects: every object a record names is kept alive by the chain.

The checkpoint checks are in verify/checkpoints.py. All of them read git
objects only (no working tree), so they run in a bare mirror as well as in
a clone. Each returns failures; none raises on a bad log.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from ..base.errors import WalError
from ..base.ids import ABSENT, UNKNOWN
from ..changes import tools
from ..changes.ledger import EXEC, Fold, Ledger, Rules
from ..log.segments import Entry, Failure, Segment, object_kind
from ..records.model import (
    AGENT_ARG,
    MISS,
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Abort,
    Approval,
    Checkpoint,
    Claim,
    Commit,
    Intent,
    Plan,
    Record,
    Seal,
    Unlogged,
    is_miss,
    type_name,
    unpredicted,
)
from ..worktree.snapshot import tree_state
from ..worktree.tree import MODE_TREE, Worktree, blob_id

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


# -- closing ---------------------------------------------------------------


def closing_failures(run: str, history: list[Entry]) -> list[Failure]:
    """Intents close at most once, by a later record; one open intent, the newest."""
    out: list[Failure] = []
    by_lsn = {e.record.lsn: e.record for e in history}
    closed: dict[int, int] = {}
    approved: dict[int, int] = {}  # intent -> its approval
    open_: Intent | None = None

    def fail(reason: str, lsn: int) -> None:
        out.append(Failure(run, "closing", reason, lsn))

    for e in history:
        r = e.record
        if isinstance(r, Plan) and r.lsn != 1:
            fail(f"a plan record at LSN {r.lsn} (the plan is LSN 1 only)", r.lsn)
        elif isinstance(r, Intent):
            if open_ is not None:
                fail(f"intent LSN {r.lsn} begins while intent LSN {open_.lsn} is still open "
                     "(at most one intent may be open)", r.lsn)
            open_ = r
        elif isinstance(r, (Checkpoint, Claim)) and open_ is not None:
            fail(f"{type_name(r)} written while intent LSN {open_.lsn} is open", r.lsn)
        elif isinstance(r, Approval):
            # The one record that may follow an open intent: an approval of it.
            if open_ is None or open_.lsn != r.intent or open_.args.get("irreversible") is not True:
                fail(f"approval of LSN {r.intent}, which is not the open irreversible intent",
                     r.lsn)
            else:
                # Approved again is allowed: an approval another clone wrote is
                # data here (trust/authority.py), so this clone approves anew.
                approved.setdefault(r.intent, r.lsn)
        elif isinstance(r, (Commit, Abort)):
            kind = type_name(r)
            target = by_lsn.get(r.intent)
            if r.intent >= r.lsn:
                fail(f"{kind} closes LSN {r.intent}, which is not an earlier record", r.lsn)
            elif not isinstance(target, Intent):
                what = ("is not in the log" if target is None
                        else f"is a {type_name(target)} record, not an intent")
                fail(f"{kind} closes LSN {r.intent}, which {what}", r.lsn)
            elif r.intent in closed:
                fail(f"{kind} closes intent LSN {r.intent}, already closed by LSN "
                     f"{closed[r.intent]}", r.lsn)
            else:
                closed[r.intent] = r.lsn
                if open_ is not None and open_.lsn == r.intent:
                    open_ = None
    trailing = [e.record for e in history if e.record.lsn > (open_.lsn if open_ else 0)]
    if open_ is not None and not all(isinstance(r, Approval) for r in trailing):
        fail(f"intent LSN {open_.lsn} ({open_.tool} {' '.join(open_.target)}) is never "
             "closed, yet records follow it (an open intent must be the newest record)",
             open_.lsn)
    return out


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


# -- objects ---------------------------------------------------------------


def named_objects(rec: Record, intents: dict[int, Intent]) -> list[tuple[str, str, ObjectType]]:
    """(object id, what it is, its type) for every object ``rec`` names."""
    out: list[tuple[str, str, ObjectType]] = []
    if isinstance(rec, Intent):
        if rec.tool == "exec":
            out.append((rec.pre[0], "pre tree", ObjectType.TREE))
        else:
            for path, pre, post in zip(rec.target, rec.pre, rec.post or rec.pre, strict=True):
                if path in rec.withheld:
                    continue  # ids only: no append keeps a secret's bytes (docs/format.md)
                out += [(pre, f"pre-image of {path}", ObjectType.BLOB),
                        (post, f"post-image of {path}", ObjectType.BLOB)]
    elif isinstance(rec, Commit):
        intent = intents.get(rec.intent)
        if intent is not None and intent.tool == "exec":
            out += [(p, "post tree", ObjectType.TREE) for p in rec.post]
        else:
            paths = intent.target if intent else tuple(f"#{n}" for n in range(len(rec.post)))
            out += [(p, f"post-image of {t}", ObjectType.BLOB)
                    for t, p in zip(paths, rec.post, strict=False)
                    if intent is None or t not in intent.withheld]
    elif isinstance(rec, Checkpoint):
        out += [(rec.tree, "checkpoint tree", ObjectType.TREE),
                (rec.plan, "plan blob", ObjectType.BLOB)]
    elif isinstance(rec, Seal):
        out.append((rec.tree, "sealed tree", ObjectType.TREE))
    elif isinstance(rec, Unlogged):
        out += [(o, f"observed state of {p}", ObjectType.BLOB)
                for p, o in zip(rec.paths, rec.observed, strict=False)]
    return [x for x in out if x[0] not in (ABSENT, UNKNOWN)]


def object_failures(repo: pygit2.Repository, run: str, segments: list[Segment],
                    intents: dict[int, Intent]) -> list[Failure]:
    """Each named object exists, has its type, and an obj-<oid> entry of this append
    or an earlier one keeps it (so `git gc` cannot drop it)."""
    out: list[Failure] = []
    for seg in segments:
        kept: set[str] = set()
        for append in seg.appends:
            kept |= append.objects
            for e in append.entries:
                for oid, what, want in named_objects(e.record, intents):
                    kind = object_kind(repo, oid)
                    where = f"LSN {e.record.lsn} names {what} {short(oid)}"
                    if kind is None:
                        reason = f"{where}, which is missing from the repository"
                    elif kind != want:
                        reason = f"{where}, which is a {kind.name.lower()}"
                    elif oid not in kept:
                        reason = (f"{where}, but no obj-{short(oid)} entry of its append "
                                  f"({append.oid[:12]}) or an earlier one keeps it alive")
                    else:
                        continue
                    out.append(Failure(run, "objects", reason, e.record.lsn))
    return out


def is_kind(repo: pygit2.Repository, oid: str, kind: ObjectType) -> bool:
    return object_kind(repo, oid) == kind
