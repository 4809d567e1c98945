"""The ledger (gitwal/changes/ledger.py): what the log says each path should hold now.

Real logs written through the CLI and the agent hooks, folded and compared
with the files on disk; a property test that folding in chunks (the hook
path's cache) gives what folding in one go gives; and the one fold's answer
to a damaged closing, which used to differ between its copies.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitwal import Wal
from gitwal.base.errors import CorruptLog
from gitwal.base.ids import ABSENT, Lsn, RunId
from gitwal.changes.ledger import (
    COMMITTED,
    EXEC,
    EXPLAINED,
    PRE,
    STEP,
    UNLOGGED,
    Fold,
    Held,
    Ledger,
    LedgerCache,
    Rules,
    base_tree,
    changes,
    fold,
)
from gitwal.log.chain import Chain
from gitwal.records.codec import encode
from gitwal.records.model import (
    REPLAY_SAFE,
    REPLAY_UNSAFE,
    Abort,
    Checkpoint,
    Commit,
    Intent,
    Plan,
    Record,
    Unlogged,
)
from gitwal.verify.replay import TreeView

from .conftest import git, ok, wal
from .test_agent_payloads import claude_run, claude_tool, run_hook

RUN = "r1"
REF = f"refs/wal/{RUN}"


def blob(data: str) -> str:
    return str(pygit2.hash(data.encode()))


def segment(repo: Path, run: str = RUN) -> list[Record]:
    return Chain(pygit2.Repository(str(repo)), RunId(run)).segment()


def head_tree(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD^{tree}").strip()


# -- real logs -------------------------------------------------------------------


def test_the_ledger_of_a_cli_log_is_the_tree_it_left(repo: Path) -> None:
    base = head_tree(repo)
    ok(repo, "begin", "--run", RUN, "--task", "t")  # LSN 1
    ok(repo, "apply", "ensure-line", "a.txt", "one")  # LSN 2, 3
    ok(repo, "apply", "ensure-line", "a.txt", "two")  # LSN 4, 5
    ok(repo, "exec", "--", "sh", "-c", "echo made > made.txt; rm README")  # LSN 6, 7
    ok(repo, "apply", "replace-text", "made.txt", "--old", "made", "--new", "nope")  # LSN 8, 9
    ok(repo, "apply", "ensure-line", "b.txt", "b")  # LSN 10, 11
    wal(repo, "apply", "--check", "false", "ensure-line", "c.txt", "c")  # LSN 12, 13: aborted
    assert not (repo / "c.txt").exists()
    w = Wal(repo)
    records = segment(repo)
    ledger = fold(w.wt, records)
    assert ledger.base == base and ledger.checkpoint is None and ledger.last == 13
    assert dict(ledger.held) == {
        "a.txt": Held(blob("one\ntwo\n"), Lsn(4), STEP),
        "made.txt": Held(blob("nope\n"), Lsn(8), STEP),
        "README": Held(ABSENT, Lsn(6), EXEC),
        "b.txt": Held(blob("b\n"), Lsn(10), STEP),
    }
    assert ledger.open == () and ledger.skipped == ()
    # Every path holds what the ledger says, those it does not name as in the base.
    for path in ("a.txt", "made.txt", "README", "b.txt", "c.txt", "nothing"):
        on_disk = blob((repo / path).read_text()) if (repo / path).exists() else ABSENT
        assert ledger.state(w.repo, path) == on_disk, path
    # The stream of every state set, in log order.
    assert [(p, h.lsn) for p, h in changes(w.wt, records)] == [
        ("a.txt", 2), ("a.txt", 4), ("README", 6), ("made.txt", 6), ("made.txt", 8),
        ("b.txt", 10)]

    # A checkpoint starts over from its tree; steps after it fold on top.
    cp = json.loads(ok(repo, "checkpoint", "--json"))["lsn"]
    ok(repo, "apply", "delete-file", "a.txt")
    after = fold(w.wt, segment(repo))
    assert after.base == head_tree(repo) and after.checkpoint == cp
    assert dict(after.held) == {"a.txt": Held(ABSENT, Lsn(cp + 1), STEP)}
    assert after.state(w.repo, "b.txt") == blob("b\n")


def test_recover_drift_names_the_step_the_ledger_says_set_the_path(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN)
    ok(repo, "apply", "ensure-line", "a.txt", "one")  # LSN 2, 3
    ok(repo, "apply", "ensure-line", "a.txt", "two")  # LSN 4, 5
    (repo / "a.txt").write_text("by hand\n")
    report = json.loads(ok(repo, "recover", "--json"))
    assert report["drift"] == [{"path": "a.txt", "lsn": 4, "expected": blob("one\ntwo\n"),
                                "actual": blob("by hand\n")}]


def test_unlogged_records_count_only_when_asked(repo: Path) -> None:
    """An edit the hooks did not see becomes an unlogged record; the expectation
    (EXPLAINED) takes its state, the committed-only ledger does not."""
    run = claude_run()
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    for event in ("PreToolUse", "PostToolUse"):
        if event == "PostToolUse":
            (repo / "README").write_text("bye\n")
        assert run_hook(repo, "claude", claude_tool(repo, event, "Edit", edit, "t1")).code == 0
    (repo / "README").write_text("behind the log\n")
    write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Write", write,
                                                "t2")).code == 0
    w = Wal(repo)
    records = segment(repo, run)
    [unlogged] = [r for r in records if isinstance(r, Unlogged)]
    [first, second] = [r for r in records if isinstance(r, Intent)]
    committed = fold(w.wt, records, COMMITTED)
    explained = fold(w.wt, records, EXPLAINED)
    assert dict(committed.held) == {"README": Held(blob("bye\n"), first.lsn, STEP)}
    assert dict(explained.held) == {"README": Held(blob("behind the log\n"), unlogged.lsn,
                                                   UNLOGGED)}
    # The Write is open: with open_pre its target is expected at its pre-image.
    assert committed.open == (second,) and committed.state(w.repo, "c.txt") == ABSENT
    pre = fold(w.wt, records, Rules(unlogged=True, open_pre=True))
    assert pre.expected() == {"README": blob("behind the log\n"), "c.txt": ABSENT}
    assert pre.held == explained.held  # a view over the open intent, not folded in


# -- damaged closings: one answer (it used to be a traceback, a crash or a guess) --


def test_a_commit_whose_post_does_not_fit_its_intent_is_a_damaged_log(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN)
    ok(repo, "apply", "ensure-line", "a.txt", "one")  # LSN 2, 3
    raw = json.loads(git(repo, "cat-file", "blob", f"{REF}:000000000003.json"))
    assert raw["type"] == "commit" and len(raw["post"]) == 1
    raw["post"] = raw["post"] * 2
    record = json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()
    blob_id = git(repo, "hash-object", "-w", "--stdin", input=record).strip()
    tree = git(repo, "mktree", input=f"100644 blob {blob_id}\t000000000003.json\n".encode())
    ident = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
             for what, value in (("NAME", "gitwal"), ("EMAIL", "gitwal@localhost"))}
    forged = subprocess.run(["git", "commit-tree", tree.strip(), "-p", f"{REF}~1", "-m",
                             "wal 3 commit"], cwd=repo, env={**os.environ, **ident},
                            check=True, capture_output=True, text=True).stdout.strip()
    git(repo, "update-ref", REF, forged)
    before = (repo / "a.txt").read_bytes()

    for args in (["recover"], ["prompt"], ["checkpoint"]):
        proc = wal(repo, *args)
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert proc.stderr.startswith(
            "error: run r1 LSN 3: the commit records 2 post id(s) for the 1 target(s) of "
            "intent LSN 2\nhint: the log was damaged or rewritten outside gitwal"), proc.stderr
        assert "Traceback" not in proc.stderr
    assert (repo / "a.txt").read_bytes() == before
    # verify reads past it: the intent check names it, nothing else trips on it.
    proc = wal(repo, "verify", "--run", RUN, "--json")
    assert proc.returncode == 1, proc.stderr
    failures = json.loads(proc.stdout)["runs"][0]["failures"]
    assert [(f["check"], f["lsn"]) for f in failures] == [("intent", 3)], failures


def test_strict_and_lenient_folds_of_a_damaged_closing(repo: Path) -> None:
    w = Wal(repo)
    trees = w.wt
    plan = Plan(RunId(RUN), Lsn(1), "t", git(repo, "rev-parse", "HEAD").strip(), "main")
    intent = Intent(RunId(RUN), Lsn(2), "write_file", {"path": "a", "content": "1" * 40},
                    ("a",), (ABSENT,), ("1" * 40,), (0,), REPLAY_SAFE, f"{RUN}:2")
    stray = Commit(RunId(RUN), Lsn(3), Lsn(7), ("2" * 40,), "x")  # closes no open intent
    good = Commit(RunId(RUN), Lsn(4), Lsn(2), ("1" * 40,), "x")
    with pytest.raises(CorruptLog, match="LSN 3: the commit closes LSN 7"):
        fold(trees, [plan, intent, stray, good])
    lenient = fold(trees, [plan, intent, stray, good], Rules(lenient=True))
    assert lenient.skipped == (3,) and dict(lenient.held) == {"a": Held("1" * 40, Lsn(2), STEP)}


def test_base_tree(repo: Path) -> None:
    w = Wal(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    plan = Plan(RunId(RUN), Lsn(1), "t", head, "main")
    assert base_tree(w.repo, plan) == head_tree(repo)
    assert base_tree(w.repo, Plan(RunId(RUN), Lsn(1), "t", "0" * 40, "main")) is None
    cp = Checkpoint(RunId(RUN), Lsn(5), head, head_tree(repo), "HEAD", 0, "1" * 40, 0, (), ())
    assert base_tree(w.repo, cp) == head_tree(repo)
    missing = Ledger.start(w.repo, Checkpoint(RunId(RUN), Lsn(5), head, "3" * 40, "HEAD", 0,
                                              "1" * 40, 0, (), ()))
    assert missing.base is None and missing.checkpoint == 5
    with pytest.raises(CorruptLog, match="the tree of checkpoint LSN 5 is missing"):
        missing.require_base()


# -- incremental == full (property) ----------------------------------------------


PATHS = ("a", "b", "c/d", "e")
BLOBS = tuple(c * 40 for c in "123456789")


@dataclass(frozen=True)
class World:
    """A repository with a few trees, for exec steps and checkpoints."""

    trees: TreeView
    tree_ids: tuple[str, ...]
    head: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    path = tmp_path_factory.mktemp("ledger")
    repo = pygit2.init_repository(str(path), bare=True)
    tree_ids = []
    for n in range(4):
        b = repo.TreeBuilder()
        for i, name in enumerate(("a", "b", "e")):
            if (n + i) % 3:
                b.insert(name, repo.create_blob(f"{name}{n}\n".encode()), pygit2.GIT_FILEMODE_BLOB)
        tree_ids.append(str(b.write()))
    sig = pygit2.Signature("t", "t@example.com")
    head = repo.create_commit(None, sig, sig, "base", pygit2.Oid(hex=tree_ids[0]), [])
    return World(TreeView(repo), tuple(tree_ids), str(head))


@st.composite
def logs(draw: st.DrawFn, world: World) -> list[Record]:
    """A well-formed run log: a plan, then steps, unlogged records, checkpoints."""
    run = RunId(RUN)
    out: list[Record] = [Plan(run, Lsn(1), "t", world.head, "main")]

    def lsn() -> Lsn:
        return Lsn(len(out) + 1)

    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["file", "file", "exec", "unlogged", "checkpoint"]))
        if kind == "file":
            paths = tuple(draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3,
                                        unique=True)))
            pre = tuple(draw(st.sampled_from((ABSENT, *BLOBS))) for _ in paths)
            post = tuple(draw(st.sampled_from((ABSENT, *BLOBS))) for _ in paths)
            i = Intent(run, lsn(), "write_files", {"paths": list(paths)}, paths, pre, post,
                       tuple(0 if p == ABSENT else 33188 for p in pre), REPLAY_SAFE,
                       f"{run}:{len(out) + 1}")
            out.append(i)
            close = draw(st.sampled_from(["commit", "observed", "abort"]))
            if close == "abort":
                out.append(Abort(run, lsn(), i.lsn, "x"))
            else:
                seen = post if close == "commit" else tuple(
                    draw(st.sampled_from(BLOBS)) for _ in paths)
                out.append(Commit(run, lsn(), i.lsn, seen, "x"))
        elif kind == "exec":
            pre_t, post_t = (draw(st.sampled_from(world.tree_ids)) for _ in range(2))
            i = Intent(run, lsn(), "exec", {"argv": ["x"]}, (".",), (pre_t,), None, (16384,),
                       REPLAY_UNSAFE, f"{run}:{len(out) + 1}")
            out.append(i)
            if draw(st.booleans()):
                out.append(Commit(run, lsn(), i.lsn, (post_t,), "x"))
            else:
                out.append(Abort(run, lsn(), i.lsn, "x"))
        elif kind == "unlogged":
            paths = tuple(sorted(draw(st.lists(st.sampled_from(PATHS), min_size=1,
                                               unique=True))))
            seen = tuple(draw(st.sampled_from((ABSENT, *BLOBS))) for _ in paths)
            out.append(Unlogged(run, lsn(), paths, seen, seen, "x"))
        else:
            tree = draw(st.sampled_from(world.tree_ids))
            out.append(Checkpoint(run, lsn(), world.head, tree, "HEAD", 0, "1" * 40, 0, (),
                                  ()))
    if draw(st.booleans()):  # a step left open at the end
        paths = (draw(st.sampled_from(PATHS)),)
        out.append(Intent(run, lsn(), "write_files", {"paths": list(paths)}, paths,
                          (BLOBS[0],), (BLOBS[1],), (33188,), REPLAY_SAFE,
                          f"{run}:{len(out) + 1}"))
    for rec in out:  # every generated record is one gitwal could have written
        encode(rec)
    return out


RULES = [COMMITTED, EXPLAINED, Rules(unlogged=True, open_pre=True), Rules(open_pre=True)]


def chunks(records: list[Record], cuts: list[int]) -> Iterator[list[Record]]:
    at = 0
    for cut in sorted(c % (len(records) + 1) for c in cuts):
        yield records[at:cut]
        at = cut
    yield records[at:]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), rules=st.sampled_from(RULES))
def test_folding_in_chunks_is_folding_in_one_go(world: World, data: st.DataObject,
                                                 rules: Rules) -> None:
    records = data.draw(logs(world))
    cuts = data.draw(st.lists(st.integers(0, 100), max_size=6))
    trees = world.trees
    full = fold(trees, records, rules)
    start = Ledger.start(trees.repo, records[0], rules)
    step = start
    for part in chunks(records, cuts):
        step = step.advance(trees, part)
    assert step == full
    # A record passed again is folded in already: the cache may be fed a whole segment.
    assert full.advance(trees, records) == full
    # The running fold, one record at a time, agrees too.
    running = Fold(trees, start).feed_all(records)
    assert running.ledger() == full and running.expected() == full.expected()
    # The fold is the last state each path got since the newest checkpoint.
    since = max((i for i, r in enumerate(records) if isinstance(r, Checkpoint)), default=0)
    last: dict[str, Held] = {}
    for path, held in changes(trees, records[since:], rules):
        last[path] = held
    assert dict(full.held) == last
    assert full.last == records[-1].lsn
    if rules.open_pre and full.open:
        (i,) = full.open
        if i.tool != "exec":
            assert all(full.expected()[p] == pre for p, pre in zip(i.target, i.pre,
                                                                   strict=True))
            assert full.state(trees.repo, i.target[0]) == i.pre[0]
    assert all(h.source != PRE for h in full.held.values())
    assert all(h.source != UNLOGGED for h in full.held.values()) or rules.unlogged


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), rules=st.sampled_from(RULES))
def test_a_cached_ledger_is_the_fold_of_the_records_given(world: World, data: st.DataObject,
                                                          rules: Rules) -> None:
    """The hook server's cache continues a kept ledger only over the same
    records: another log from the same plan (a record never appended, a
    rewritten log) is folded afresh."""
    records = data.draw(logs(world))
    other = data.draw(logs(world))  # shares the plan (LSN 1), differs after it
    trees = world.trees
    cache = LedgerCache()
    cuts = sorted(data.draw(st.lists(st.integers(1, len(records)), max_size=6)))
    for cut in [*cuts, len(records)]:
        assert cache.fold(trees, RUN, records[:cut], rules) == fold(trees, records[:cut], rules)
        mixed = other[:cut]
        assert cache.fold(trees, RUN, mixed, rules) == fold(trees, mixed, rules)
        # Copies of the records (as a re-read decodes them) continue the same fold.
        copies = [dataclasses.replace(r) for r in records[:cut]]
        assert cache.fold(trees, RUN, copies, rules) == fold(trees, copies, rules)
