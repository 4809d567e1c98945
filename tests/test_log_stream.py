"""`git wal log --json` streams: rows in LSN order as the records are read,
an intent's status from its closing, the records before a defect printed and
nothing after it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitwal import Wal
from gitwal.base.ids import Lsn, RunId
from gitwal.log.chain import Chain
from gitwal.records.codec import encode
from gitwal.records.model import REPLAY_SAFE, Abort, Commit, Intent, Plan, Record, Unlogged
from gitwal.records.rows import log_rows

from .conftest import ok, wal
from .test_log_trust import RUN, append_raw, canonical, victim  # noqa: F401 (fixture)

R = RunId("r")
A, B = "a" * 40, "b" * 40


def intent(lsn: int, post: str = B) -> Intent:
    return Intent(run=R, lsn=Lsn(lsn), tool="write_file", args={"path": f"f{lsn}", "content": post},
                  target=(f"f{lsn}",), pre=(A,), post=(post,), mode=(0o100644,),
                  replay=REPLAY_SAFE, key=f"r:{lsn}", check=None, step=None)


def rows(records: list[Record]) -> list[tuple[int, str]]:
    out = []
    for row in log_rows((r, encode(r)) for r in records):
        d = json.loads(row) if isinstance(row, bytes) else row
        out.append((d["lsn"], d.get("status", d["type"])))
    return out


def test_rows_keep_lsn_order_while_intents_wait_for_their_closing() -> None:
    plan = Plan(run=R, lsn=Lsn(1), task="t", base=A, steps=(), branch=None,
                worktree=None)
    records: list[Record] = [
        plan, intent(2), intent(3),
        Unlogged(run=R, lsn=Lsn(4), paths=("x",), expected=(A,), observed=(B,), noticed="n"),
        Commit(run=R, lsn=Lsn(5), intent=Lsn(3), post=(B,), verified="v", recovered=False),
        Abort(run=R, lsn=Lsn(6), intent=Lsn(2), reason="no", restored=(), output=""),
        intent(7), Commit(run=R, lsn=Lsn(8), intent=Lsn(7), post=(A,), verified="v",
                          recovered=False),
        intent(9),
    ]
    assert rows(records) == [(1, "plan"), (2, "aborted"), (3, "committed"), (4, "unlogged"),
                             (5, "commit"), (6, "abort"), (7, "committed"), (8, "commit"),
                             (9, "open")]
    missed = [d for d in log_rows((r, encode(r)) for r in records) if isinstance(d, dict)]
    assert [d["lsn"] for d in missed if d["prediction_miss"]] == [7]  # observed A, predicted B


def test_run_stream_is_the_whole_log_in_order(repo: Path) -> None:
    ok(repo, "begin", "--run", "s", "--task", "t")
    for i in range(5):
        ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=f"{i}\n".encode())
    run = Wal(repo).run("s", read_only=True)
    streamed = list(run.stream())
    assert [r.lsn for r, _ in streamed] == list(range(1, 12))
    assert streamed == run.store.raw_records()
    assert all(encode(r) == raw for r, raw in streamed)


def test_the_records_before_a_defect_are_printed_and_nothing_after(victim: Path) -> None:  # noqa: F811
    # LSN 4 closes the plan: refused where it is met; LSN 5 is never printed.
    append_raw(victim, RUN, 4, canonical({"v": 1, "type": "abort", "run": RUN, "lsn": 4,
                                          "intent": 1, "reason": "x", "restored": [],
                                          "output": ""}))
    append_raw(victim, RUN, 5, canonical({"v": 1, "type": "abort", "run": RUN, "lsn": 5,
                                          "intent": 2, "reason": "x", "restored": [],
                                          "output": ""}))
    proc = wal(victim, "log", "--run", RUN, "--json")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "LSN 4: the abort closes LSN 1" in proc.stderr
    *rows, error = map(json.loads, proc.stdout.splitlines())
    assert [row["lsn"] for row in rows] == [1, 2, 3]
    # The defect ends the stream as the error document (docs/json.md, "Errors").
    assert error["kind"] == "CorruptLog" and error["exit_code"] == proc.returncode
    assert "LSN 4: the abort closes LSN 1" in error["error"]


def _peak_of_rows(pairs: int) -> int:
    """Peak traced memory while `log --json` rows of a plan and ``pairs``
    committed steps stream through (records made one at a time)."""
    import tracemalloc

    def records() -> Iterator[tuple[Record, bytes]]:
        plan = Plan(run=R, lsn=Lsn(1), task="t", base=A, steps=(), branch=None,
                    worktree=None)
        yield plan, encode(plan)
        for k in range(pairs):
            i = intent(2 + 2 * k)
            c = Commit(run=R, lsn=Lsn(3 + 2 * k), intent=i.lsn, post=(B,), verified="v",
                       recovered=False)
            yield i, encode(i)
            yield c, encode(c)

    tracemalloc.start()
    try:
        for _ in log_rows(records()):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_rows_hold_nothing_per_record_once_it_is_printed() -> None:
    # Ten times the records, the same peak (a kept closing per step would
    # add about 1 MB per 5,000 steps).
    small, large = _peak_of_rows(1_000), _peak_of_rows(10_000)
    assert large < small * 1.5 + 64 * 1024, (small, large)


def test_status_and_recover_read_the_segment_in_one_pass(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(repo, "begin", "--run", "s", "--task", "t")
    for i in range(3):
        ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=f"{i}\n".encode())

    def held(self: Chain, head: object = None) -> list[Record]:
        raise AssertionError("the whole segment was read into memory")

    monkeypatch.setattr(Chain, "segment", held)
    monkeypatch.setattr(Chain, "records", held)
    wal_ = Wal(repo)
    status = wal_.status("s")
    assert status.committed == (2, 4, 6) and status.records == 7
    report = wal_.recover("s")
    assert [d.lsn for d in report.committed] == [2, 4, 6] and report.records == 7
    assert report.last_step is not None and report.last_step.lsn == 6
