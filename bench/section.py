"""One section of the benchmark report, and what every section measures with:
interleaved sampling, table rows, a repository to run gitwal in."""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .common import Stats, fmt_ratio, fmt_spread, fmt_time, sh, table, timed
from .fixtures import init_repo

BLOCKS = 5  # contenders alternate in this many blocks


def say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


@dataclass
class Section:
    title: str
    how: str
    header: Sequence[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    targets: list[tuple[str, str, bool]] = field(default_factory=list)  # target, got, ok
    more: list[str] = field(default_factory=list)  # markdown blocks after the table
    seconds: float = 0.0  # how long the benchmark took

    def render(self) -> str:
        parts = [f"## {self.title}", "", table(self.header, self.rows), "",
                 *[f"{block}\n" for block in self.more], f"How measured: {self.how}"]
        if self.notes:
            parts += ["", *[f"* {n}" for n in self.notes]]
        return "\n".join(parts)


def sample_interleaved(
    ops: dict[str, Callable[[], object]],
    n: int,
    blocks: int = BLOCKS,
    prepare: Callable[[], object] | None = None,
) -> dict[str, Stats]:
    """``n`` timed calls of each op, alternating ops in ``blocks`` blocks.

    ``prepare`` (not timed) runs before every timed call.
    """
    samples: dict[str, list[float]] = {name: [] for name in ops}
    per_block = max(1, n // blocks)
    names = list(ops)
    for b in range(blocks):
        order = names[b % len(names):] + names[: b % len(names)]
        for name in order:
            op = ops[name]
            for _ in range(per_block):
                if prepare is not None:
                    prepare()
                samples[name].append(timed(op))
    return {name: Stats.of(xs) for name, xs in samples.items()}


def stat_row(label: str, s: Stats, base: Stats, *extra: str) -> list[str]:
    """A row: n, median, spread, ratio of medians and of p10s to ``base``, extra cells."""
    return [label, str(s.n), fmt_time(s.median), fmt_spread(s),
            fmt_ratio(s.median / base.median), fmt_ratio(s.p10 / base.p10), *extra]


def fmt_counts(counts: dict[str, float]) -> str:
    """Per-operation counts, largest first, e.g. "`objects/xx` 3.0, `objects` 1.0"."""
    items = sorted(((k, v) for k, v in counts.items() if abs(v) >= 0.05), key=lambda kv: -kv[1])
    return ", ".join(f"`{k}` {v:.1f}" for k, v in items)


def base_repo(root: Path, files: dict[str, bytes]) -> Path:
    """A repo with one commit, already packed, so later loose objects are the log's."""
    init_repo(root, files)
    sh("git", "gc", "-q", "--prune=now", cwd=root)
    return root


def profile_calls(op: Callable[[], object], n: int) -> str:
    """The functions where ``n`` calls of ``op`` spend their own time (cProfile, top 8)."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        op()
    prof.disable()
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    entries = []
    for (filename, _line, func), (_cc, ncalls, tottime, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        if filename != "~":
            func = f"{Path(filename).stem}.{func}"
        m = re.fullmatch(r"<(?:built-in )?method '?([\w.]+)'?(?: of '(?:\w+\.)*(\w+)' objects)?>",
                         func)
        if m:
            func = f"{m.group(2)}.{m.group(1)}" if m.group(2) else m.group(1)
        entries.append((tottime, f"`{func}` {fmt_time(tottime / n)} "
                                 f"({ncalls / n:.0f} calls)"))
    entries.sort(reverse=True)
    return "; ".join(text for _t, text in entries[:8])
