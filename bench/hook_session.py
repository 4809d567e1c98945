"""§7 of the report: the cost of gitwal's Claude Code hooks over a long session.

No agent runs here: the bench plays Claude Code around 1,000 ``Edit`` calls,
then 200 ``Bash`` calls (100 and 20 in a quick run) in one session, with
Claude Code's payloads and the exact hook command ``git wal install claude``
writes (the stdlib client and the hook server), run through ``sh -c`` as
Claude Code runs it. Each call is ``PreToolUse``, the tool's effect (the edit,
or the command ``echo x > f<k>.txt`` run by the bench), then ``PostToolUse``;
every hook process is timed whole. The question is whether a call gets
slower as the session's log grows: call 1,000 against call 10.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from .agent_hooks import installed
from .common import QUICK, ROOT, Stats, fmt_ratio, fmt_time, met, sh
from .fixtures import init_repo
from .section import Section, say
from .svg import line_plot

EDITS = 100 if QUICK else 1_000
SHELLS = 20 if QUICK else 200
FILES = 40  # files the Edits rewrite in turn
WINDOW = 11  # calls per window: 5..15 at the start, the last 11 Edits at the end
TARGET = 1.1  # late window / early window, medians, per event
PLOT = ROOT / "docs" / "bench-hooks.svg"
EVENTS = ("PreToolUse", "PostToolUse")


def make_repo(root: Path) -> Path:
    files = {f"src{i:02d}.ts": f"export const n{i} = 0;\n".encode() for i in range(FILES)}
    return init_repo(root, files)


def hook(command: str, repo: Path, payload: dict[str, object]) -> float:
    """One hook process, timed whole (``sh -c``, the payload on stdin)."""
    data = json.dumps(payload).encode()
    t0 = time.perf_counter()
    proc = subprocess.run(["sh", "-c", command], cwd=repo, input=data, capture_output=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"hook exited {proc.returncode}: {proc.stderr.decode()}")
    return seconds


def session(repo: Path, command: str, sid: str, edits: int,
            shells: int) -> dict[str, list[float]]:
    """Seconds of every PreToolUse and PostToolUse call, in call order."""
    times: dict[str, list[float]] = {e: [] for e in EVENTS}
    versions = [0] * FILES
    for k in range(edits + shells):
        base: dict[str, object] = {
            "session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": str(repo),
            "permission_mode": "default", "tool_use_id": f"toolu_{sid}_{k:05d}"}
        if k < edits:
            i = k % FILES
            path = repo / f"src{i:02d}.ts"
            old, new = f"= {versions[i]};", f"= {versions[i] + 1};"
            base |= {"tool_name": "Edit", "tool_input": {
                "file_path": str(path), "old_string": old, "new_string": new,
                "replace_all": False}}
            response: dict[str, object] = {"filePath": str(path), "success": True}
        else:
            cmd = f"echo x > f{k - edits}.txt"
            base |= {"tool_name": "Bash",
                     "tool_input": {"command": cmd, "description": "write a file"}}
            response = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}
        times["PreToolUse"].append(hook(command, repo, {**base,
                                                        "hook_event_name": "PreToolUse"}))
        if k < edits:
            path.write_text(path.read_text().replace(old, new))
            versions[i] += 1
        else:
            subprocess.run(["sh", "-c", cmd], cwd=repo, check=True)
        times["PostToolUse"].append(hook(command, repo, {
            **base, "hook_event_name": "PostToolUse", "tool_response": response}))
    return times


def window(xs: list[float], first: int, last: int) -> Stats:
    """Calls ``first``..``last`` (1-based, inclusive)."""
    return Stats.of(xs[first - 1:last])


def plot(times: dict[str, list[float]]) -> None:
    series = [(f"{event} (each call)", [(float(i + 1), s * 1e3) for i, s in enumerate(xs)])
              for event, xs in times.items()]
    every = sorted(y for _name, pts in series for _x, y in pts)
    top = 2 * every[int(0.95 * (len(every) - 1))]  # a server start or a stall: off the top
    PLOT.write_text(line_plot(
        f"gitwal's Claude Code hooks: {EDITS:,} Edit then {SHELLS:,} Bash calls, one session",
        "call number", "ms per hook process", series, [(EDITS + 0.5, "Bash calls")],
        y_max=round(top)))


def bench_hook_session(work: Path) -> Section:
    say(f"7/7 hook session ({EDITS:,} Edit + {SHELLS:,} Bash calls)")
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # the hook servers' sockets, ours alone
    try:
        warm = make_repo(work / "hooks-warm")  # bytecode cached, the first server start paid
        session(warm, installed(warm, in_process=False), "warm", 5, 2)
        repo = make_repo(work / "hooks-session")
        command = installed(repo, in_process=False)
        t0 = time.perf_counter()
        times = session(repo, command, "bench", EDITS, SHELLS)
        spent = time.perf_counter() - t0
    finally:
        sh("git-wal", "agent-server", "--stop", "--all", cwd=work)  # none may linger
    plot(times)
    early, late = (5, 15), (EDITS - WINDOW + 1, EDITS)
    shells = (EDITS + 1, EDITS + WINDOW), (EDITS + SHELLS - WINDOW + 1, EDITS + SHELLS)
    section = Section(
        "7. Agent hooks over a long session",
        f"one Claude Code session replayed against the hook command `git wal install "
        f"claude` writes (stdlib client + hook server), no agent and no model: {EDITS:,} "
        f"`Edit` calls on {FILES} files in turn, then {SHELLS:,} `Bash` calls "
        "(`echo x > f<k>.txt`, run by the bench between the two hooks, as the agent "
        "would); each call = `PreToolUse`, the effect, `PostToolUse`, one after the other "
        "(here the `PostToolUse` is waited for, even where Claude Code runs it in the "
        "background); every hook process timed whole (`sh -c`, payload on stdin, "
        "`time.perf_counter`). A warm-up session in another repository first (bytecode "
        "cached). Windows: medians of calls 5-15 against the last 11 `Edit` calls "
        f"({late[0]:,}-{late[1]:,}); spread p10 .. p90. Every call: "
        "[docs/bench-hooks.svg](bench-hooks.svg).",
        ["event", "calls", "median", "p10 .. p90", "ratio to calls 5-15", "target", "met"],
    )
    for event, xs in times.items():
        a, b = window(xs, *early), window(xs, *late)
        ok = b.median <= TARGET * a.median
        section.rows.append([f"{event}, `Edit`", "5-15", fmt_time(a.median),
                             f"{fmt_time(a.p10)} .. {fmt_time(a.p90)}", "1.00x", "—", "—"])
        section.rows.append([f"{event}, `Edit`", f"{late[0]:,}-{late[1]:,}",
                             fmt_time(b.median), f"{fmt_time(b.p10)} .. {fmt_time(b.p90)}",
                             fmt_ratio(b.median / a.median), f"≤ {TARGET}x", met(ok)])
        section.targets.append((f"§7 {event}: call {EDITS:,} within {TARGET}x of call 10",
                                fmt_ratio(b.median / a.median), ok))
        for first, last in shells:
            s = window(xs, first, last)
            section.rows.append([f"{event}, `Bash`", f"{first:,}-{last:,}", fmt_time(s.median),
                                 f"{fmt_time(s.p10)} .. {fmt_time(s.p90)}",
                                 fmt_ratio(s.median / a.median), "—", "—"])
    section.notes.append(
        f"The session's {EDITS + SHELLS:,} calls took {spent:.1f} s in all "
        f"({2 * (EDITS + SHELLS):,} hook processes, the bench's own edits and commands).")
    section.notes.append("![cost per hook call against call number](bench-hooks.svg)")
    if QUICK:
        section.notes.append(f"Quick run: {EDITS} Edits and {SHELLS} Bash calls, not 1,000 "
                             "and 200.")
    return section
