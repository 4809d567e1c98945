"""A scripted 40-Edit Claude Code session: gitwal's hooks against no-op hooks.

The real ``claude`` CLI (the pinned version, installed on first use, see
tests/e2e/pinned.py) plays the same scripted session against the
scripted API on 127.0.0.1: rename ``getUserById`` to ``fetchUser`` in 40
files, one Edit call per file. Three hook set-ups, each in a fresh repository
and a fresh home:

* ``gitwal``: what ``git wal install claude --scope project`` writes;
* ``no-op``: the same entries (events, matchers) with every command ``true``,
  so Claude Code starts as many hook processes and each does nothing;
* ``none``: no hooks at all (for context).

Runs alternate between set-ups (after one untimed warm-up of each) so that
background load hits them alike; the medians and the ratio gitwal / no-op are
printed as a markdown snippet and written into docs/benchmarks.md as its
section 8 when `make bench` left a place for it there (bench/run.py). The
target is a ratio of at most 1.2.

    python -m bench.claude_session [--runs 5] [--edits 40] [--latency SECONDS] [--json]

``--latency`` makes the scripted model take that long to answer each turn
(default 0: the session is nothing but Claude Code, its hooks and the disk).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.agents import RenameAgent, edit_results, rename_files
from tests.e2e.claude import (
    ClaudeCode,
    cmd,
    install_gitwal_hooks,
    make_project,
    noop_like,
    private_runtime_dir,
    sealed_env,
    stop_servers,
)
from tests.e2e.fake_api import FakeApi
from tests.e2e.pinned import CLAUDE, find

from .common import REPORT, Stats, fmt_ratio, fmt_spread, fmt_time, met, table

VERSION = CLAUDE.version

TARGET = 1.2
# Seconds to let the disk settle first: after a benchmark that wrote and
# deleted gigabytes (`make bench` runs this one after bench.run), fsync
# latency stays high for a while, and only gitwal's hooks fsync.
SETTLE = 20.0
PROMPT = "Rename getUserById to fetchUser everywhere under src/, one file at a time."


def title(edits: int = 40) -> str:
    return f"## 8. Claude Code session: {edits} Edit calls with the real binary"


TARGET_NAME = f"§8 Claude Code session, gitwal / no-op hooks ≤ {TARGET}x"
# What bench/run.py writes until this benchmark has run (make bench runs it right after).
PENDING_ROW = [TARGET_NAME, "not measured yet: `python -m bench.claude_session` fills it in",
               "—"]
PENDING_SECTION = (f"{title()}\n\nNot measured yet: `make bench` runs `python -m "
                   "bench.claude_session` right after `bench.run`, which writes this section "
                   "(it needs the real Claude Code binary, docs/e2e.md; without it, it says "
                   "why here).\n")


def fill_report(section: str, measured: str, ok: bool | None) -> bool:
    """Put §8 and its target row into docs/benchmarks.md where bench/run.py left
    their places; False (nothing written) when there is no such place."""
    if not REPORT.exists():
        return False
    text = REPORT.read_text()
    at = text.find(PENDING_SECTION)
    row = "| " + " | ".join(PENDING_ROW) + " |"
    if at < 0 or row not in text:
        return False
    verdict = "—" if ok is None else met(ok)
    text = text.replace(row, f"| {TARGET_NAME} | {measured} | {verdict} |")
    text = text.replace(PENDING_SECTION, section.rstrip() + "\n")
    REPORT.write_text(text)
    return True


@dataclass(frozen=True)
class Setup:
    """A hook set-up: "gitwal", a settings object, or None (no hooks)."""

    kind: str
    hooks: str | dict[str, Any] | None


def session(claude: Path, work: Path, setup: Setup, n: int, edits: int,
            latency: float, runtime: Path) -> float:
    """One scripted session; its wall time in seconds (checked before it counts).

    gitwal's hook server for the session's repository (started by its first
    hook, so its start is part of the session) is stopped afterwards: its
    idle tree checks must not run into the next session's time.
    """
    name = f"{setup.kind}-{n}"
    files = rename_files(edits)
    plan = sorted(p for p in files if p.startswith("src/f"))
    repo = work / name
    make_project(repo, files, sealed_env(work / f"home-{name}"), setup.hooks)
    agent = RenameAgent(repo, files, plan)
    with FakeApi(agent, latency=latency) as api:
        out = ClaudeCode(claude, work / f"home-{name}", api.url).run(repo, PROMPT)
        results = edit_results(api.main_requests)
        errors = api.errors
    stop_servers(runtime)
    result = out.result
    bad = [p for p, rs in results.items() if len(rs) != 1 or rs[0].get("is_error")]
    if out.returncode != 0 or result.get("is_error") or errors or bad or len(results) != edits:
        raise RuntimeError(f"{name}: session failed (exit {out.returncode}, "
                           f"{len(results)} files edited, bad {bad[:3]}, errors {errors[:3]}, "
                           f"result {str(result.get('result'))[:300]!r})")
    for p in plan:
        if (repo / p).read_text() != files[p].replace("getUserById", "fetchUser"):
            raise RuntimeError(f"{name}: {p} is not renamed")
    shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(work / f"home-{name}", ignore_errors=True)
    return out.seconds


def measure(claude: Path, work: Path, runs: int, edits: int, latency: float,
            runtime: Path) -> dict[str, list[float]]:
    probe = work / "probe"
    probe.mkdir()
    env = sealed_env(work / "home-probe")
    cmd(probe, "git", "init", "-q", env=env)
    template = install_gitwal_hooks(probe, env)
    setups = [Setup("gitwal", "gitwal"), Setup("no-op", noop_like(template)),
              Setup("none", None)]
    for s in setups:  # warm-up: page cache, bytecode, Claude Code's first start
        session(claude, work, s, 0, edits, latency, runtime)
    times: dict[str, list[float]] = {s.kind: [] for s in setups}
    for n in range(1, runs + 1):
        order = setups if n % 2 else setups[::-1]
        for s in order:
            times[s.kind].append(session(claude, work, s, n, edits, latency, runtime))
            print(f"claude_session: run {n}/{runs} {s.kind}: {times[s.kind][-1]:.2f} s",
                  file=sys.stderr, flush=True)
    return times


def render(times: dict[str, list[float]], edits: int, latency: float) -> str:
    stats = {k: Stats.of(v) for k, v in times.items()}
    base = stats["no-op"].median
    ratio = stats["gitwal"].median / base
    rows = [[kind, fmt_time(s.median), fmt_spread(s), str(s.n),
             fmt_time((s.median - stats["none"].median) / edits)]
            for kind, s in stats.items()]
    overhead = (stats["gitwal"].median - base) / edits
    return "\n".join([
        f"### Claude Code session: {edits} Edit calls (Claude Code {VERSION}, scripted API"
        + (f", {latency:g} s per model turn" if latency else "") + ")",
        "",
        table(["hooks", "median session", "p10 .. p90", "runs", "per Edit vs no hooks"], rows),
        "",
        f"gitwal / no-op hooks: **{fmt_ratio(ratio)}** (target <= {TARGET}x: "
        f"{met(ratio <= TARGET)}); gitwal adds {fmt_time(overhead)} per Edit call "
        "over no-op hooks.",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.claude_session", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="timed sessions per set-up")
    ap.add_argument("--edits", type=int, default=40, help="files renamed, one Edit each")
    ap.add_argument("--latency", type=float, default=0.0,
                    help="seconds the scripted model takes per turn")
    ap.add_argument("--json", action="store_true", help="print the raw timings as JSON too")
    args = ap.parse_args(argv)
    found = find(CLAUDE)
    if found.path is None:
        print(f"claude_session: skipped: {found.reason}", file=sys.stderr)
        fill_report(f"{title(args.edits)}\n\nSkipped: {found.reason}\n",
                    "skipped (no Claude Code)", None)
        return 0
    os.sync()
    time.sleep(SETTLE)
    work = Path(tempfile.mkdtemp(prefix="gitwal-claude-bench-"))
    try:
        with private_runtime_dir() as runtime:
            times = measure(found.path, work, args.runs, args.edits, args.latency, runtime)
    except (RuntimeError, AssertionError) as e:  # a session that failed is not timed
        print(f"claude_session: error: {e}", file=sys.stderr)
        fill_report(f"{title(args.edits)}\n\nFailed, so not timed: {e}\n", "failed (see §8)",
                    None)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    snippet = render(times, args.edits, args.latency)
    print(snippet)
    ratio = Stats.of(times["gitwal"]).median / Stats.of(times["no-op"]).median
    given = f"--runs {args.runs}" + (f" --edits {args.edits}" if args.edits != 40 else "")
    method = (f"`python -m bench.claude_session {given}` (bench/claude_session.py, "
              "docs/e2e.md): the real Claude Code against the scripted API on 127.0.0.1 "
              f"renames a symbol in {args.edits} files, one `Edit` each; gitwal's hooks as "
              "`git wal install claude` writes them, against the same hook entries (events, "
              "matchers, `async`) with every command `true`, and against no hooks. After "
              f"`sync` and {SETTLE:g} s of rest, one warm-up session each, then alternating "
              "rounds; session wall time.")
    section = f"{title(args.edits)}\n\n{method}\n\n{snippet}\n"
    if fill_report(section, fmt_ratio(ratio), ratio <= TARGET):
        print(f"claude_session: wrote section 8 of {REPORT.name}", file=sys.stderr)
    if args.json:
        print(json.dumps({"edits": args.edits, "latency": args.latency, "seconds": times}))
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
