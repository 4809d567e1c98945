"""§2 of the report: one full step (intent, write, commit), gitwal against a
hand-written reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import probe
from .common import QUICK, fmt_ratio, met
from .ops import STEP_PATH, GitwalStep, ReferenceStep
from .section import (
    BLOCKS,
    Section,
    base_repo,
    fmt_counts,
    profile_calls,
    sample_interleaved,
    say,
    stat_row,
)

STEPS = 40 if QUICK else 150  # per contender
TARGET = 2.0  # gitwal step / reference step, medians


def bench_step(work: Path) -> Section:
    say(f"2/7 full step ({STEPS} steps per contender)")
    files = {STEP_PATH: b"initial\n", "README": b"step benchmark\n"}
    repo_root = base_repo(work / "step-repo", files)
    gitwal = GitwalStep(repo_root)
    # A repository of its own: while its commit is held back, its step reads as
    # in flight to other runs, whose steps on the same path it would refuse.
    grouped = GitwalStep(base_repo(work / "step-repo-grouped", files), "bench-step-grouped",
                         group_commit=True)
    ref_root = work / "step-reference"
    ref_root.mkdir()
    (ref_root / "src").mkdir()
    (ref_root / STEP_PATH).write_bytes(b"initial\n")
    ops: dict[str, Callable[[], object]] = {
        "reference step (JSONL intent+fsync, atomic write, sha256 verify, "
        "JSONL commit+fsync)": ReferenceStep(ref_root),
        "gitwal `run.apply(\"write_file\", ...)`": gitwal,
        "gitwal, group commit (`wal.run(..., group_commit=True)`)": grouped,
    }
    for op in ops.values():
        for _ in range(5):
            op()
    stats = sample_interleaved(ops, STEPS)
    fsyncs: dict[str, float | None] = dict.fromkeys(ops)
    by_path: dict[str, dict[str, float]] = {}
    if probe.strace_available():
        say("   strace: fsyncs per step")
        setup = lambda r: base_repo(r, files)  # noqa: E731

        def ref_setup(r: Path) -> None:
            (r / "src").mkdir()
            (r / STEP_PATH).write_bytes(b"initial\n")

        kinds = ["reference-step", "gitwal-step", "gitwal-step-grouped"]
        for name, kind in zip(ops, kinds, strict=True):
            prepare = setup if kind.startswith("gitwal") else ref_setup
            counts = probe.per_op(prepare, kind, work, 30, trace=probe.BY_PATH)
            fsyncs[name] = sum(counts.values())
            by_path[kind] = counts
    ref_stats = stats[next(iter(ops))]
    ref = ref_stats.median
    section = Section(
        "2. Full step: one end-state file edit",
        f"one ~200-byte file rewritten per step with new content each time; {STEPS} steps "
        f"per contender after 5 warm-up steps, interleaved in {BLOCKS} blocks, in-process; "
        "wall time per step; spread is p10 .. p90; fsyncs/op counted with strace as in §1.",
        ["contender", "n", "median", "p10 .. p90", "ratio to reference (medians)",
         "ratio to reference (p10s)", "fsyncs/op", "target", "met"],
    )
    for name, s in stats.items():
        is_gitwal = name.startswith("gitwal")
        ok = s.median <= TARGET * ref
        f = fsyncs[name]
        section.rows.append(stat_row(
            name, s, ref_stats, "n/a" if f is None else f"{f:.1f}",
            f"≤ {TARGET:g}x reference" if is_gitwal else "—", met(ok) if is_gitwal else "—"))
        if is_gitwal:
            how = ", group commit" if "group commit" in name else ""
            section.targets.append((f"§2 full step `run.apply`{how} ≤ {TARGET:g}x reference "
                                    "step", fmt_ratio(s.median / ref), ok))
    section.notes.append(
        "Group commit: a step's commit record rides in the next step's append (one append "
        "per step); the step returns with `durable=False` until then, and a crash before "
        "leaves it for recovery to commit (docs/format.md, \"Group commit\").")
    for kind, counts in by_path.items():
        section.notes.append(f"fsyncs per {kind.replace('-', ' ')}, by what they sync "
                             f"(`strace -y`): {fmt_counts(counts)}.")
    section.notes.append(
        "Where a gitwal step spends its own time (cProfile, 30 steps, per step, top 8 by "
        "self time; profiling inflates Python-heavy parts): " + profile_calls(gitwal, 30) + ".")
    return section
