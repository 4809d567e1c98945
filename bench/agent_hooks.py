"""Agent hook cost: a 40-Edit session's hook calls with gitwal's hooks against no-op hooks.

No agent runs here (tests/e2e and bench/claude_session.py run the real
Claude Code): this script replays what Claude Code does around 40 ``Edit``
calls, each one ``PreToolUse`` hook, the edit itself, ``PostToolUse`` hook,
with the exact payloads and the exact hook command ``git wal install claude``
writes, run through ``sh -c`` as Claude Code runs it. Set-ups, each in a fresh
repository of 40 files (a warm-up session first, so the server is running and
bytecode is cached):

* ``no-op``: the command ``true`` (the floor: what any hook costs);
* ``server``: the installed command (stdlib client + hook server);
* ``in-process``: ``python -m gitwal hook claude`` (``--in-process`` install).

Run: ``python -m bench.agent_hooks [--sessions N] [--markdown]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Stats, fmt_ratio, fmt_spread, fmt_time, seal_environment, sh, table
from bench.fixtures import init_repo

EDITS = 40


def make_repo(root: Path) -> Path:
    files = {f"src{i:02d}.ts": f"export const n{i} = getUserById({i});\n".encode()
             for i in range(EDITS)}
    return init_repo(root, files)


def installed(repo: Path, in_process: bool) -> str:
    """The PreToolUse command `git wal install claude` writes."""
    args = ["git-wal", "install", "claude", "--scope", "local"]
    sh(*args, *(["--in-process"] if in_process else []), cwd=repo)
    data = json.loads((repo / ".claude" / "settings.local.json").read_text())
    command = data["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert isinstance(command, str)
    return command


def hook(command: str, repo: Path, payload: dict[str, object]) -> None:
    proc = subprocess.run(["sh", "-c", command], cwd=repo, input=json.dumps(payload).encode(),
                          capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"hook exited {proc.returncode}: {proc.stderr.decode()}")


def session(repo: Path, command: str, sid: str) -> float:
    """Seconds for 40 (PreToolUse, Edit, PostToolUse) rounds."""
    t0 = time.perf_counter()
    for i in range(EDITS):
        path = repo / f"src{i:02d}.ts"
        tool_input = {"file_path": str(path), "old_string": "getUserById",
                      "new_string": "fetchUser", "replace_all": False}
        base = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": str(repo),
                "permission_mode": "default", "tool_name": "Edit", "tool_input": tool_input,
                "tool_use_id": f"toolu_{sid}_{i:02d}"}
        hook(command, repo, {**base, "hook_event_name": "PreToolUse"})
        path.write_text(path.read_text().replace("getUserById", "fetchUser"))
        hook(command, repo, {**base, "hook_event_name": "PostToolUse",
                             "tool_response": {"filePath": str(path), "success": True}})
    return time.perf_counter() - t0


def reset(repo: Path) -> None:
    sh("git", "checkout", "-q", "--", ".", cwd=repo)


def measure(sessions: int, tmp: Path) -> dict[str, Stats]:
    repos = {name: make_repo(tmp / name) for name in ("no-op", "server", "in-process")}
    commands = {"no-op": "true",
                "server": installed(repos["server"], in_process=False),
                "in-process": installed(repos["in-process"], in_process=True)}
    for name, repo in repos.items():  # warm-up: server started, bytecode cached
        session(repo, commands[name], f"warm-{name}")
        reset(repo)
    samples: dict[str, list[float]] = {name: [] for name in repos}
    for n in range(sessions):  # interleaved, so load on the machine hits all alike
        for name, repo in repos.items():
            samples[name].append(session(repo, commands[name], f"s{n}-{name}"))
            reset(repo)
    return {name: Stats.of(xs) for name, xs in samples.items()}


def startup_costs() -> list[tuple[str, Stats]]:
    client = Path(__file__).resolve().parent.parent / "gitwal" / "agents" / "hook_client.py"
    probes = {
        "`python3 -c pass`": [sys.executable, "-c", "pass"],
        "`python3 -S -E hook_client.py` (no request)": [sys.executable, "-S", "-E",
                                                         str(client)],
        "`python3 -c 'import gitwal.agents.hook'`": [sys.executable, "-c",
                                                      "import gitwal.agents.hook"],
        "`python3 -c 'import gitwal.cli'`": [sys.executable, "-c", "import gitwal.cli"],
    }
    out = []
    for label, argv in probes.items():
        xs = []
        for _ in range(15):
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
            xs.append(time.perf_counter() - t0)
        out.append((label, Stats.of(xs)))
    return out


def report(stats: dict[str, Stats], startup: list[tuple[str, Stats]], sessions: int) -> str:
    floor = stats["no-op"].median
    rows = [[name, fmt_time(s.median), fmt_spread(s), str(s.n),
             fmt_time(s.median / EDITS), fmt_time((s.median - floor) / EDITS),
             fmt_ratio(s.median / floor)] for name, s in stats.items()]
    lines = [table(["hooks", "40-Edit session (median)", "p10 .. p90", "sessions",
                    "per Edit", "per Edit over no-op", "vs no-op"], rows), ""]
    lines.append(table(["process", "median", "p10 .. p90"],
                       [[label, fmt_time(s.median), fmt_spread(s)] for label, s in startup]))
    lines.append("")
    lines.append(f"Hooks only (no model, no agent): {sessions} sessions per set-up, "
                 "interleaved, after a warm-up session; each hook run through `sh -c` with "
                 "the payload on stdin, as Claude Code runs it.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitwal-agent-bench-") as d:
        tmp = Path(d)
        seal_environment(tmp / "home", tmp / "pycache")
        os.environ["XDG_RUNTIME_DIR"] = str(tmp / "run")
        (tmp / "run").mkdir(mode=0o700)
        try:
            stats = measure(args.sessions, tmp)
            startup = startup_costs()
        finally:
            sh("git-wal", "agent-server", "--stop", "--all", cwd=tmp)  # none may linger
    print(report(stats, startup, args.sessions))


if __name__ == "__main__":
    main()
