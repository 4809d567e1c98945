"""§10 of the report: several runs on one repository (docs/agents-together.md).

1. What an intent costs more when other runs are live in the repository: 0,
   1, 2 and 8 other runs, each a Claude Code session left with a claim of a
   file of its own and, newest, an open intent on another (what a step's guard
   scans: both scans' worst case, as neither names the measured step's path).
   Timed as users run it, whole processes (`git wal hook claude` PreToolUse +
   the write + PostToolUse for an Edit; `git wal apply write-file`), and in
   process (the same hook calls through ``run_hook``, what the hook server
   runs; the guard alone), each set of contenders interleaved in blocks.
2. Step throughput: 1 agent against 8 at once, each its own session on files
   of its own, every step whole hook processes (and the same with `git wal
   apply` loops).

The pieces are bench/many_runs.py's (also runnable on its own).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from .common import QUICK, Stats, fmt_ratio, fmt_spread, fmt_time, met, sh, table
from .fixtures import init_repo
from .many_runs import (
    Hook,
    add_others,
    agents_at_once,
    apply,
    edit_step,
    guard,
    hook,
    hook_in_process,
    parallel,
)
from .section import Section, profile_calls, sample_interleaved, say

OTHERS = (0, 1, 2, 8)
TARGET_MS = 1.0  # added per intent at 8 other runs
WHOLE = 10 if QUICK else 25  # whole-process samples per contender
IN_PROCESS = 50 if QUICK else 250  # in-process hook pairs per contender
GUARDS = 200 if QUICK else 1500  # in-process guards per contender
AGENTS = 8
STEPS = 3 if QUICK else 8  # Edits (or applies) per agent in the throughput rounds
ROUNDS = 1 if QUICK else 3


def _repos(work: Path, kind: str) -> dict[int, Path]:
    repos = {}
    for r in OTHERS:
        repo = init_repo(work / f"together-{kind}-{r}", {"mine.txt": b"x\n"})
        add_others(repo, r)
        repos[r] = repo
    return repos


def _edits(repos: dict[int, Path], run_hook: Hook) -> dict[str, Callable[[], object]]:
    """One Edit of ``mine.txt`` per call, a fresh word each time."""
    words = itertools.count()

    def edit(repo: Path) -> float:
        return edit_step(repo, "me", "mine.txt", f"w{next(words)}", run_hook)
    return {str(r): functools.partial(edit, repo) for r, repo in repos.items()}


def _applies(repos: dict[int, Path]) -> dict[str, Callable[[], object]]:
    """One `git wal apply write-file mine.txt` process per call."""
    words = itertools.count()

    def step(repo: Path) -> float:
        return apply(repo, "me", "mine.txt", f"w{next(words)}\n".encode())
    return {str(r): functools.partial(step, repo) for r, repo in repos.items()}


def _rows(what: str, stats: dict[str, Stats]) -> list[list[str]]:
    base = stats["0"]
    return [[what, r, str(s.n), fmt_time(s.median), fmt_spread(s),
             "—" if r == "0" else _ms(s.median - base.median),
             "—" if r == "0" else _ms(s.p10 - base.p10)] for r, s in stats.items()]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.2f} ms"


def _resolution(s: Stats) -> float:
    """A rough standard error of a median of ``s.n`` samples: the p10 .. p90
    width (about 2.56 sd for a normal spread) times 1.25 sd / √n."""
    return 1.25 * (s.p90 - s.p10) / 2.56 / math.sqrt(s.n)


def _throughput(work: Path) -> tuple[list[list[str]], str]:
    rates: dict[tuple[str, int], list[float]] = {}
    for _ in range(ROUNDS):  # 1 and 8 alternate, so load hits both alike
        for agents in (1, AGENTS):
            wall = agents_at_once(work, agents, STEPS)
            rates.setdefault(("hook", agents), []).append(agents * STEPS / wall)
            wall = parallel(work, STEPS, runs=agents)
            rates.setdefault(("apply", agents), []).append(agents * STEPS / wall)
    rows = []
    ratio = ""
    for kind, label in (("hook", "Edit: `git wal hook claude` PreToolUse + write + "
                                 "PostToolUse"),
                        ("apply", "`git wal apply write-file`")):
        one = statistics.median(rates[(kind, 1)])
        many = statistics.median(rates[(kind, AGENTS)])
        rows.append([label, f"{one:.2f}", f"{many:.2f}", fmt_ratio(many / one),
                     ", ".join(f"{x:.2f}" for x in rates[(kind, AGENTS)])])
        ratio = ratio or fmt_ratio(many / one)
    return rows, ratio


def bench_agents_together(work: Path) -> Section:
    say(f"§10 several runs: {', '.join(map(str, OTHERS))} other runs; {WHOLE} whole-process "
        f"steps, {IN_PROCESS} in-process hook pairs, {GUARDS} guards each; "
        f"1 vs {AGENTS} agents x {STEPS} steps, {ROUNDS} round(s)")
    hooks, applies = _repos(work, "hook"), _repos(work, "apply")
    for repo in applies.values():
        sh("git-wal", "begin", "--run", "me", cwd=repo)
        apply(repo, "me", "mine.txt", b"warm\n")  # bytecode cached, run begun
    for repo in hooks.values():
        edit_step(repo, "me", "mine.txt", "warm", hook)
    whole_hook = sample_interleaved(_edits(hooks, hook), WHOLE)
    say("    whole-process Edits done")
    whole_apply = sample_interleaved(_applies(applies), WHOLE)
    say("    whole-process applies done")
    in_process = sample_interleaved(_edits(hooks, hook_in_process), IN_PROCESS)
    say("    in-process Edits done")
    guards: dict[str, Callable[[], object]] = {str(r): guard(repo, "me")
                                               for r, repo in applies.items()}
    guard_stats = sample_interleaved(guards, GUARDS)
    where = profile_calls(guards[str(OTHERS[-1])], min(GUARDS, 500))
    say("    guards done")
    flow_rows, ratio = _throughput(work)

    top = str(OTHERS[-1])
    added = in_process[top].median - in_process["0"].median
    ok = added <= TARGET_MS / 1e3
    noise_whole = _resolution(whole_hook["0"])
    noise_in = _resolution(in_process["0"])
    section = Section(
        "10. Several runs on one repository",
        f"in each of {len(OTHERS)} repositories, {', '.join(map(str, OTHERS))} other runs are "
        "live, each a Claude Code session left (in process, set-up only) with a claim of a "
        "file of its own and, newest, an open Edit intent on another: a step's guard "
        "(`kept_off_others`: its path lock, then every other run's newest record, then every "
        "claiming run's claims, read from a fold cached per head) scans them all, and none "
        "names the measured step's path "
        "(the scans' worst case short of a refusal). Measured there, on one file of its own "
        "(`mine.txt`): a whole Edit (`git wal hook claude` PreToolUse, the write, "
        "PostToolUse: two processes, payloads on stdin, timed together), a whole `git wal "
        f"apply write-file` process ({WHOLE} each per repository), the same Edit in process "
        f"through `run_hook` ({IN_PROCESS} each: the function `git wal hook claude` and the "
        f"hook server run) and the guard alone ({GUARDS} each); the repositories alternate "
        "in 5 blocks per kind, so background load hits them alike. *Added* is the median "
        "(and the p10) minus the one with 0 other runs. An Edit logs one intent. "
        f"Throughput: 1 and then {AGENTS} agents at once, each its own session (or `git wal "
        f"apply` run) with files of its own, {STEPS} steps each, every step whole processes, "
        f"{ROUNDS} round(s) alternating 1 and {AGENTS}; steps per second in total (median "
        "over rounds).",
        ["timed", "other runs", "n", "median", "p10 .. p90", "added (medians)",
         "added (p10s)"],
        targets=[(f"§10 added per intent with {top} other live runs ≤ {TARGET_MS:g} ms "
                  "(in process)", _ms(added), ok)],
    )
    for what, stats in (("Edit, whole processes", whole_hook),
                        ("`git wal apply`, whole process", whole_apply),
                        ("Edit, in process (`run_hook`)", in_process),
                        ("guard alone, in process", guard_stats)):
        section.rows += _rows(what, stats)
    section.notes += [
        f"Target ≤ {TARGET_MS:g} ms added per intent with {top} other live runs: "
        f"{_ms(added)} ({met(ok)}), from the in-process Edit (medians of {IN_PROCESS}), the "
        "same code users run in the hook server or in `git wal hook claude` without the "
        "interpreter start. Why not the whole processes: a process start (Python, pygit2, "
        f"~130 ms or more) varies by far more than 1 ms; here the median of {WHOLE} whole "
        f"Edits is known to about ±{fmt_time(noise_whole)}, the in-process one to about "
        f"±{fmt_time(noise_in)} (1.25 sd / √n, sd from the p10 .. p90 width), so only the "
        "latter can resolve 1 ms" + ("" if noise_in <= TARGET_MS / 1e3 else
                                    " (not in this run: the machine's load spread it)")
        + ". The guard is the only part of an Edit that reads other "
        "runs (once, in PreToolUse); timed alone it keeps one repository open across "
        "calls (libgit2's caches warm), where each hook call opens it afresh, so its "
        "*added* is a lower bound of the Edit's.",
        f"Where the guard spends its time with {top} other runs (cProfile, own time per "
        f"guard): {where}.",
        f"Throughput: {AGENTS} agents at once make {ratio} the steps per second of one "
        f"(Edits). Steps of different runs on different files wait for no lock of each "
        "other's (a run's lock is its own, a path lock is the path's, and a pack merge "
        "another process holds is skipped, not waited for): the ratio is how far the "
        f"machine's {os.cpu_count()} CPUs and its disk take {AGENTS} agents' processes at "
        "once (on a shared machine, alongside other work).",
    ]
    section.more.append("### Throughput: 1 agent against " + str(AGENTS) + " at once\n\n"
                        + table(["step", "1 agent (steps/s)",
                                 f"{AGENTS} agents at once (steps/s, in total)",
                                 f"{AGENTS} / 1", f"{AGENTS} agents, each round"], flow_rows))
    if QUICK:
        section.notes.append(f"Quick run: {WHOLE} whole-process and {IN_PROCESS} in-process "
                             f"samples, {STEPS} steps per agent, {ROUNDS} round; the full "
                             "run is larger.")
    return section


__all__ = ["bench_agents_together"]
