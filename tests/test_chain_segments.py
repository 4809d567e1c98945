"""Reading a run's segment (gitwal/log/chain.py): the segments a process read are kept
by head commit, so a later read walks only the appends made since, and gives
exactly what a read from scratch gives, damage included."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from gitwal.base.errors import CorruptLog
from gitwal.base.ids import CommitId, Lsn, RunId
from gitwal.log import readcache
from gitwal.log.chain import Chain
from gitwal.records.model import Checkpoint, Plan, Record

from .conftest import git, ok, wal

RUN = "r1"
REF = f"refs/wal/{RUN}"


@pytest.fixture(autouse=True)
def fresh() -> None:
    readcache.SEGMENTS.clear()


def reader(repo: Path) -> Chain:
    return Chain(pygit2.Repository(str(repo)), RunId(RUN))


def from_scratch(repo: Path) -> list[Record]:
    readcache.SEGMENTS.clear()
    try:
        return reader(repo).segment()
    finally:
        readcache.SEGMENTS.clear()


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The append commits whose records are decoded from now on."""
    seen: list[str] = []
    real = Chain._commit_records

    def counted(self: Chain, commit: pygit2.Commit) -> list[Record]:
        seen.append(str(commit.id))
        return real(self, commit)

    monkeypatch.setattr(Chain, "_commit_records", counted)
    return seen


def test_a_later_read_walks_only_the_new_appends(repo: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ok(repo, "begin", "--run", RUN, "--task", "t")
    for line in ("one", "two", "three"):
        ok(repo, "apply", "ensure-line", "a.txt", line)
    first = reader(repo).segment()
    assert [r.lsn for r in first] == list(range(1, 8))
    reads = count_reads(monkeypatch)
    assert reader(repo).segment() == first and reads == []  # kept: nothing decoded
    ok(repo, "apply", "ensure-line", "a.txt", "four")  # two appends: intent, commit
    new = [git(repo, "rev-parse", rev).strip() for rev in (REF, f"{REF}~1")]
    again = reader(repo).segment()
    assert reads == new  # the new appends only, newest first
    assert again == from_scratch(repo) and [r.lsn for r in again] == list(range(1, 10))


def test_a_segment_starts_at_the_newest_checkpoint(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "ensure-line", "a.txt", "one")
    assert isinstance(reader(repo).segment()[0], Plan)
    cp = json.loads(ok(repo, "checkpoint", "--json"))["lsn"]
    ok(repo, "apply", "ensure-line", "a.txt", "two")
    records = reader(repo).segment()
    assert isinstance(records[0], Checkpoint) and records[0].lsn == cp
    assert records == from_scratch(repo)


def test_a_forged_append_on_a_kept_segment_is_refused(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "ensure-line", "a.txt", "one")  # LSN 2, 3
    kept = reader(repo).segment()
    # An append written outside gitwal: a record that skips LSN 4.
    raw = json.loads(git(repo, "cat-file", "blob", f"{REF}:000000000003.json"))
    raw["lsn"], raw["intent"] = 5, 2
    record = json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()
    blob_id = git(repo, "hash-object", "-w", "--stdin", input=record).strip()
    tree = git(repo, "mktree", input=f"100644 blob {blob_id}\t000000000005.json\n".encode())
    forged = subprocess.run(["git", "commit-tree", tree.strip(), "-p", REF, "-m", "wal 5"],
                            cwd=repo, env=os.environ, check=True, capture_output=True,
                            text=True).stdout.strip()
    git(repo, "update-ref", REF, forged)
    with pytest.raises(CorruptLog, match="expected LSN 4, found 5"):
        reader(repo).segment()  # on top of the kept segment
    with pytest.raises(CorruptLog, match="expected LSN 4, found 5"):
        from_scratch(repo)
    # The segment of the head it was forged on is still the one read before.
    parent = CommitId(git(repo, "rev-parse", f"{REF}~1").strip())
    assert reader(repo).segment(parent) == kept


def test_only_the_newest_used_segments_are_kept() -> None:
    kept = readcache.Segments()
    plan = Plan(RunId("r"), Lsn(1), "t", "c" * 40, "main")
    for i in range(readcache.SEGMENTS_KEPT):
        kept.put(("repo", "r", str(i)), [plan])
    assert kept.get(("repo", "r", "0")) == (plan,)  # used: now the newest
    kept.put(("repo", "r", "new"), [plan])
    assert kept.get(("repo", "r", "1")) is None  # the least recently used went
    assert kept.get(("repo", "r", "0")) == (plan,) and kept.get(("repo", "r", "new"))


def test_the_root_plan_is_found_again_by_walking_only_the_new_appends(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook server checks a run's plan at every call: it must not walk the
    whole chain each time (the call's cost would grow with the session)."""
    readcache.ROOT_PLANS.clear()
    ok(repo, "begin", "--run", RUN, "--task", "first")
    for i in range(6):
        ok(repo, "apply", "--run", RUN, "write-file", "a.txt", input=f"{i}\n".encode())
    first = reader(repo)
    assert first.root_plan(CommitId(git(repo, "rev-parse", REF).strip())).task == "first"
    for i in range(2):
        ok(repo, "apply", "--run", RUN, "write-file", "a.txt", input=f"x{i}\n".encode())
    walked: list[str] = []
    real = Chain._commit

    def counted(self: Chain, oid: str | pygit2.Oid) -> pygit2.Commit:
        walked.append(str(oid))
        return real(self, oid)

    monkeypatch.setattr(Chain, "_commit", counted)
    head = CommitId(git(repo, "rev-parse", REF).strip())
    assert reader(repo).root_plan(head).task == "first"
    assert len(walked) == 4  # the two steps' four appends, then the known one
    # A run dropped and begun again under the same id has another root.
    ok(repo, "drop", RUN)
    ok(repo, "begin", "--run", RUN, "--task", "second")
    head = CommitId(git(repo, "rev-parse", REF).strip())
    assert reader(repo).root_plan(head).task == "second"


# -- forward: the segment streamed, for one-shot readers (status, recover) -----------


def forward(repo: Path) -> list[Record]:
    readcache.SEGMENTS.clear()
    return list(reader(repo).forward())


def reword_head(repo: Path, message: str) -> None:
    """Give the head append another commit message (written outside gitwal)."""
    tree = git(repo, "rev-parse", f"{REF}^{{tree}}").strip()
    forged = subprocess.run(["git", "commit-tree", tree, "-p", f"{REF}~1", "-m", message],
                            cwd=repo, env=os.environ, check=True, capture_output=True,
                            text=True).stdout.strip()
    git(repo, "update-ref", REF, forged)


def test_forward_streams_the_segment_a_walk_reads(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "ensure-line", "a.txt", "one")
    assert forward(repo) == from_scratch(repo) and len(forward(repo)) == 3
    ok(repo, "checkpoint")
    ok(repo, "apply", "ensure-line", "a.txt", "two")
    ok(repo, "apply", "ensure-line", "a.txt", "three")
    records = forward(repo)
    assert isinstance(records[0], Checkpoint) and records == from_scratch(repo)


def test_a_checkpoint_the_messages_do_not_name_is_read_past_and_still_starts_it(
        repo: Path) -> None:
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "ensure-line", "a.txt", "one")
    ok(repo, "checkpoint")
    reword_head(repo, "wal 4 something else")  # the checkpoint's append
    ok(repo, "apply", "ensure-line", "a.txt", "two")
    records = forward(repo)
    assert isinstance(records[0], Plan) and isinstance(records[3], Checkpoint)
    status = json.loads(ok(repo, "status", "--json"))
    report = json.loads(ok(repo, "recover", "--json"))
    # Readers start the segment over at the checkpoint, as a walk would.
    assert status["checkpoint"] == 4 and status["committed"] == [5]
    assert report["checkpoint"] == 4 and report["committed"] == [5]
    assert [c["lsn"] for c in report["committed_steps"]] == [5]


def test_a_message_naming_a_checkpoint_that_is_not_there_is_refused(repo: Path) -> None:
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "ensure-line", "a.txt", "one")  # head: the commit, LSN 3
    reword_head(repo, "wal 3 checkpoint 0123456789ab covers 2")
    with pytest.raises(CorruptLog, match="does not start with a plan or checkpoint"):
        forward(repo)
    for command in ("status", "recover"):
        out = wal(repo, command)
        assert out.returncode != 0 and "error:" in out.stderr and "Traceback" not in out.stderr
