"""`git wal order` (gitwal/together/order.py): one order of several runs' committed steps,
derived from the states their records carry; forks and cycles named; the
replay of the order checked against the tree."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from gitwal.base.ids import ABSENT, Lsn
from gitwal.changes.history import Change
from gitwal.together.order import Step, derive

from .conftest import GIT_WAL, git, ok, wal
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
    # From the base (x: D, y: C), a's first step began from what b's last
    # wrote, and b's first from what a's last wrote: no order satisfies both.
    a = [step("a", 2, ("x", A, B)), step("a", 4, ("y", C, D))]
    b = [step("b", 2, ("y", D, A)), step("b", 4, ("x", D, A))]
    base = {"x": D, "y": C}.__getitem__
    ordered, conflicts = derive([a, b], base)
    assert [(c.kind, c.steps) for c in conflicts] == [("cycle", (("a", 2), ("b", 4)))]
    assert keys(ordered) == [("a", 2), ("a", 4), ("b", 2), ("b", 4)]  # placed, and named
    # Without the base, "x began as A, and someone changed it to D unlogged"
    # explains the same steps: an unlogged edit, for verify's notes, not a conflict.
    assert derive([a, b])[1] == ()


def test_a_revert_across_runs_is_ordered_not_a_cycle() -> None:
    # b changes x from A to B; a puts A back, then changes it to C. The states
    # alone would also fit "a's LSN 2 first", but then a's LSN 4 would have
    # begun from a state b had moved the path away from; the order is found.
    a = [step("a", 2, ("x", B, A)), step("a", 4, ("x", A, C))]
    b = [step("b", 2, ("x", A, B))]
    ordered, conflicts = derive([a, b])
    assert conflicts == ()
    assert keys(ordered) == [("b", 2), ("a", 2), ("a", 4)]
    # Two runs taking turns on one path, each undoing the other's change.
    a = [step("a", 2, ("x", A, B)), step("a", 4, ("x", A, C))]
    b = [step("b", 2, ("x", B, A)), step("b", 4, ("x", C, A))]
    ordered, conflicts = derive([a, b])
    assert conflicts == ()
    assert keys(ordered) == [("a", 2), ("b", 2), ("a", 4), ("b", 4)]


def test_a_stale_read_after_other_steps_is_a_fork() -> None:
    # b began from A after a had already moved x to B (a lost update), even
    # though a later step of a's touches other paths.
    a = [step("a", 2, ("x", A, B)), step("a", 4, ("y", ABSENT, C))]
    b = [step("b", 2, ("y", C, D)), step("b", 4, ("x", A, D))]
    _ordered, conflicts = derive([a, b])
    assert [(c.kind, c.path, c.steps) for c in conflicts] == [
        ("fork", "x", (("a", 2), ("b", 4)))]


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


def test_verify_all_orders_the_runs_and_finds_a_change_a_merge_lost(repo: Path) -> None:
    ok(repo, "begin", "--run", "a")
    ok(repo, "apply", "--run", "a", "write-file", "shared.txt", "--from", "-", input=b"a\n")
    ok(repo, "checkpoint", "--run", "a")
    ok(repo, "begin", "--run", "b")  # began from a's post: after it in the order
    ok(repo, "apply", "--run", "b", "write-file", "shared.txt", "--from", "-", input=b"b\n")
    ok(repo, "checkpoint", "--run", "b")
    data = json.loads(ok(repo, "verify", "--all", "--json"))
    assert data["ok"], data
    # A merge that kept a's version: every state on the branch is one a step
    # left (the branch check is content), yet b's change, on the branch, is gone.
    (repo / "shared.txt").write_text("a\n")
    git(repo, "commit", "-qam", "keep a's version")
    proc = wal(repo, "verify", "--all")
    assert proc.returncode == 1
    assert ("b LSN 2: order: shared.txt on refs/heads/main" in proc.stdout
            and "holds what run a LSN 2 left, though run b LSN 2" in proc.stdout), proc.stdout
    assert "ok   a:" in proc.stdout  # the lost change is b's failure, not a's
    assert wal(repo, "verify", "--run", "b").returncode == 0  # one run alone cannot tell


def test_verify_all_names_both_steps_of_a_fork(repo: Path) -> None:
    # Two runs' shell steps rewrite one file from the same state: b's never saw a's.
    ok(repo, "begin", "--run", "a")
    ok(repo, "begin", "--run", "b")
    ok(repo, "exec", "--run", "a", "--", "sh", "-c", "echo a > shared.txt")
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", "echo b > b.txt")
    ok(repo, "exec", "--run", "a", "--", "sh", "-c", "git show HEAD:README > shared.txt "
       "2>/dev/null || rm shared.txt")
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", "echo b2 > shared.txt")
    assert json.loads(ok(repo, "verify", "--all", "--json"))["ok"]  # a revert, then b

    fifo = repo.parent / "go"
    os.mkfifo(fifo)
    # d's shell step starts (its intent and pre tree logged), then waits on the
    # fifo; c's step writes c.txt meanwhile; then d's writes it too, from the
    # state it snapshotted (none): a lost update no path lock can see in advance.
    ok(repo, "begin", "--run", "c")
    ok(repo, "begin", "--run", "d")
    d = subprocess.Popen([GIT_WAL, "exec", "--run", "d", "--", "sh", "-c",
                          f"cat {fifo} >/dev/null; echo d > c.txt"], cwd=repo)
    with open(fifo, "wb"):  # d's command is running once this opens
        ok(repo, "exec", "--run", "c", "--", "sh", "-c", "echo c > c.txt")
    assert d.wait() == 0
    proc = wal(repo, "verify", "--all")
    assert proc.returncode == 1
    assert ("c LSN 2: order: fork: c.txt: changed from the same state by run c LSN 2 and "
            "run d LSN 2") in proc.stdout
    assert "d LSN 2: order: fork: c.txt" in proc.stdout
    assert "ok   a:" in proc.stdout and "ok   b:" in proc.stdout


def interleaved(seed: int, runs: int, steps: int) -> tuple[list[list[Step]], dict[str, str]]:
    """Runs taking random turns on a few files, putting back earlier states often
    (so many steps share a pre-state): a history one serial order explains."""
    rnd = random.Random(seed)
    state = {f"f{i}": f"{i:040x}" for i in range(6)}
    base = dict(state)
    lanes: dict[str, list[Step]] = {f"r{r}": [] for r in range(runs)}
    for n in range(runs * steps):
        run = f"r{rnd.randrange(runs)}"
        changes = []
        for path in rnd.sample(sorted(state), rnd.randint(1, 2)):
            after = (rnd.choice(sorted(base.values())) if rnd.random() < 0.3
                     else f"{n + 100:040x}")
            changes.append(Change(path, state[path], 0o100644, after))
            state[path] = after
        lane = lanes[run]
        lane.append(Step(run, Lsn(2 * len(lane) + 2), "write_file", tuple(changes), n // 7))
    return list(lanes.values()), base


@pytest.mark.parametrize("seed", range(6))
def test_random_interleavings_with_reverts_are_ordered_and_a_stale_read_is_one_fork(
        seed: int) -> None:
    lanes, base = interleaved(seed, runs=2 + seed, steps=60)
    ordered, conflicts = derive(lanes, base.__getitem__)
    assert conflicts == ()
    state = dict(base)  # the order replays: every step finds what it began from
    for s in ordered:
        for c in s.changes:
            assert state[c.path] == c.before, (s.key, c.path)
            state[c.path] = c.after
    # One more step, in another run than the one that moved f0 away from the
    # first new state it had: it began from that state, long gone.
    chain = [(s, c) for s in ordered for c in s.changes if c.path == "f0"]
    k = next(k for k, (_s, c) in enumerate(chain) if c.after not in base.values())
    gone, mover = chain[k][1].after, chain[k + 1][0]
    lane = next(lane for lane in lanes if lane[0].run != mover.run)
    stale = Step(lane[0].run, Lsn(int(lane[-1].lsn) + 2), "write_file",
                 (Change("f0", gone, 0o100644, "e" * 40),), 10**6)
    lane.append(stale)
    again, conflicts = derive(lanes, base.__getitem__)
    assert sorted(s.key for s in again) == sorted(s.key for lane in lanes for s in lane)
    if conflicts:  # else another order explains it too: then it must replay
        assert any(c.kind == "fork" and stale.key in c.steps for c in conflicts), conflicts
    else:
        state = dict(base)
        for s in again:
            for c in s.changes:
                assert state[c.path] == c.before, (s.key, c.path)
                state[c.path] = c.after


def test_a_run_whose_base_is_not_here_is_ordered_without_a_start(repo: Path) -> None:
    import pygit2

    from gitwal.together.order import common_base

    git_repo = pygit2.Repository(str(repo))
    head = str(git_repo.head.target)
    assert common_base(git_repo, [head, "1" * 40]) is None  # not a traceback
    assert common_base(git_repo, [head, head]) == head


def wide(paths: int, steps: int) -> tuple[list[list[Step]], dict[str, str]]:
    """One shell step that changed ``paths`` files, two runs of ``steps`` steps on
    their own files each, then both rewrite one file from the same state: a fork
    that only shows at the end, so the search tries every interleaving first."""
    big = Step("a", Lsn(2), "exec", tuple(Change(f"big/f{i}", ABSENT, 0o100644, f"{i:040x}")
                                          for i in range(paths)), 0)
    lanes: list[list[Step]] = [[big]]
    for run in ("c", "d"):
        lane = [step(run, 2 * n + 2, (f"{run}{n}", ABSENT, f"{n + 1:039x}{run}"))
                for n in range(steps)]
        lane.append(step(run, 2 * steps + 2, ("c.txt", ABSENT, run * 40)))
        lanes.append(lane)
    base = {p: ABSENT for lane in lanes for s in lane for p in (c.path for c in s.changes)}
    return lanes, base


def test_the_search_holds_one_map_of_states_not_one_per_point_it_tried() -> None:
    """A pushed log must not exhaust a CI job: the search's memory is O(steps +
    paths), whatever the number of points it tries (it copied every path's
    state at each: 600 paths x ~300 points held 26 MiB, 4,000 x ~3,400 1.4 GB)."""
    import tracemalloc

    lanes, base = wide(paths=600, steps=12)
    tracemalloc.start()
    try:
        _ordered, conflicts = derive(lanes, base.__getitem__)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(c.kind, c.path) for c in conflicts] == [("fork", "c.txt")]
    assert peak < 6 << 20, f"{peak / 2**20:.0f} MiB"  # about 1 MiB


def test_the_search_stops_at_its_work_budget_and_still_names_the_fork(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The work is counted in path changes looked at, applied or taken back (and
    runs looked at), capped at WORK_BUDGET + WORK_PER_CHANGE x path changes for
    the search and as much again for the placement; past it, the rest is placed
    oldest first and the conflicts are still named."""
    from gitwal.together import schedule as sched

    lanes, base = wide(paths=300, steps=30)
    changes = sum(len(s.changes) for lane in lanes for s in lane)
    monkeypatch.setattr(sched, "WORK_BUDGET", 0)
    monkeypatch.setattr(sched, "WORK_PER_CHANGE", 1)
    found = sched.schedule(lanes, base)
    assert not found.complete and found.unchecked > 0
    limit = changes
    # each check stops at the first unit past the limit; one step is at most its changes
    assert found.work <= 2 * limit + 2 * 301 + 3 * len(lanes)
    assert sorted(found.lanes) == sorted(i for i, lane in enumerate(lanes) for _ in lane)
    ordered, conflicts = derive(lanes, base.__getitem__)
    assert ("fork", "c.txt") in [(c.kind, c.path) for c in conflicts]
    assert len(ordered) == sum(map(len, lanes))
