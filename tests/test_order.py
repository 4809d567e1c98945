"""`git wal order` (gitwal/order.py): one order of several runs' committed steps,
derived from the states their records carry; forks and cycles named; the
replay of the order checked against the tree."""

from __future__ import annotations

import json
from pathlib import Path

from gitwal.history import Change
from gitwal.ids import ABSENT, Lsn
from gitwal.order import Step, derive

from .conftest import ok, wal
from .test_json_schema import check

A, B, C, D = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)


def step(run: str, lsn: int, *changes: tuple[str, str, str]) -> Step:
    return Step(run, Lsn(lsn), "write_file",
                tuple(Change(p, before, 0o100644, after) for p, before, after in changes))


def keys(steps: tuple[Step, ...]) -> list[tuple[str, int]]:
    return [s.key for s in steps]


def test_a_step_comes_after_the_other_runs_step_whose_post_it_began_from() -> None:
    # Run "a" sorts first, yet b's LSN 2 must precede a's LSN 4 (a began from b's post).
    a = [step("a", 2, ("x", ABSENT, A)), step("a", 4, ("y", B, C))]
    b = [step("b", 2, ("y", ABSENT, B))]
    ordered, conflicts = derive([a, b])
    assert conflicts == ()
    assert keys(ordered) == [("a", 2), ("b", 2), ("a", 4)]


def test_two_runs_from_the_same_state_are_a_fork_and_a_contradiction_a_cycle() -> None:
    ordered, conflicts = derive([[step("a", 2, ("x", A, B))], [step("b", 2, ("x", A, C))]])
    [fork] = conflicts
    assert fork.kind == "fork" and fork.path == "x"
    assert "run a LSN 2 and run b LSN 2" in fork.detail
    assert len(ordered) == 2
    # a began from b's post and b from a's: no order satisfies both (or one run
    # put back a state the other had: the states alone cannot tell which).
    ordered, conflicts = derive([[step("a", 2, ("x", B, C))], [step("b", 2, ("x", C, B))]])
    [cycle] = conflicts
    assert cycle.kind == "cycle" and cycle.steps == (("a", 2), ("b", 2))
    assert keys(ordered) == [("a", 2), ("b", 2)]  # placed by run and LSN, and named


def test_two_runs_interleaving_on_one_tree_replay_to_it(repo: Path) -> None:
    ok(repo, "begin", "--run", "a")
    ok(repo, "apply", "--run", "a", "write-file", "shared.txt", "--from", "-", input=b"1\n")
    ok(repo, "begin", "--run", "b")
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", "echo 2 >> shared.txt; echo b > b.txt")
    ok(repo, "apply", "--run", "a", "ensure-line", "shared.txt", "3")
    ok(repo, "apply", "--run", "b", "write-file", "b.txt", "--from", "-", input=b"bb\n")
    data = check(json.loads(ok(repo, "order", "--json")), "order")
    assert data["ok"] and data["conflicts"] == [] and data["replay_differs"] == []
    assert [(s["run"], s["lsn"]) for s in data["steps"]] == [
        ("a", 2), ("b", 2), ("a", 4), ("b", 4)]
    text = ok(repo, "order")
    assert text.splitlines()[1].startswith("b      2  exec")
    assert ok(repo, "order", "--since", "HEAD") == text  # both runs began on HEAD

    (repo / "b.txt").write_text("someone else\n")  # an edit no step explains
    proc = wal(repo, "order")
    assert proc.returncode == 1
    assert "replay differs: b.txt is not what the order leaves there" in proc.stderr
    assert wal(repo, "order", "--since", "no-such-ref").returncode == 1
