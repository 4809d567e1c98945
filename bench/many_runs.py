"""Several runs on one tree: what keeping them off each other's paths costs,
timed with whole processes (docs/agents-together.md).

* ``apply``: one `git wal apply write-file` process at a time, each on its
  own file (the single step's latency);
* ``parallel``: two runs, each a loop of `git wal apply` processes on files of
  its own, both loops at once (wall time for all the steps);
* ``checks``: in process, the added work alone (path lock, scans), to
  explain the whole-process numbers;
* ``parallel with a check``: the same with a 0.5 s ``--check`` per step (a
  check runs while the step holds its locks);
* ``shell step``: in process, what a shell step adds among ``--others`` runs
  (shell_among.py): the other runs' LSNs at its intent, ``theirs`` and
  ``claimed`` at its closing, each other run having committed a step meanwhile;
* ``hook``: `git wal hook claude` (in-process) for an Edit's PreToolUse and
  PostToolUse, with ``--others`` other live runs in the repository, each
  holding an open agent intent on a file of its own (the scan's worst case).

Run: ``python -m bench.many_runs [--steps N] [--others R] [--exec-only]``; compare two
builds by running it with each on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import GIT_WAL, Stats, fmt_time, seal_environment, sh
from bench.fixtures import init_repo


def _apply(repo: Path, run: str, path: str, data: bytes) -> float:
    t0 = time.perf_counter()
    subprocess.run([GIT_WAL, "apply", "--run", run, "write-file", path], cwd=repo,
                   input=data, check=True, capture_output=True)
    return time.perf_counter() - t0


def apply_latency(root: Path, steps: int) -> Stats:
    repo = init_repo(root / "apply", {f"f{i}.txt": b"x\n" for i in range(steps)})
    sh("git-wal", "begin", "--run", "a", cwd=repo)
    _apply(repo, "a", "warm.txt", b"w\n")
    return Stats.of([_apply(repo, "a", f"f{i}.txt", f"{i}\n".encode()) for i in range(steps)])


def parallel(root: Path, steps: int, check: str = "") -> float:
    repo = init_repo(root / f"parallel{bool(check)}", {"README": b"r\n"})
    for run in ("a", "b"):
        sh("git-wal", "begin", "--run", run, cwd=repo)
    opt = f"--check '{check}' " if check else ""
    loop = ("for i in $(seq 1 {n}); do echo $i | git-wal apply --run {r} " + opt +
            "write-file {r}$i.txt >/dev/null || exit 1; done")
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["sh", "-c", loop.format(n=steps, r=r)], cwd=repo)
             for r in ("a", "b")]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("a parallel apply failed")
    return time.perf_counter() - t0


def _hook(repo: Path, payload: dict[str, object]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([GIT_WAL, "hook", "claude"], cwd=repo,
                          input=json.dumps(payload).encode(), capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode())
    return time.perf_counter() - t0


def _payload(repo: Path, session: str, event: str, path: str, call: str) -> dict[str, object]:
    out: dict[str, object] = {
        "session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(repo),
        "permission_mode": "default", "hook_event_name": event, "tool_name": "Edit",
        "tool_input": {"file_path": str(repo / path), "old_string": "x", "new_string": call},
        "tool_use_id": call}
    if event == "PostToolUse":
        out["tool_response"] = {"success": True}
    return out


def hook_latency(root: Path, steps: int, others: int) -> Stats:
    files = {f"f{i}.txt": b"x\n" for i in range(steps)}
    files.update({f"o{k}.txt": b"x\n" for k in range(others)})
    repo = init_repo(root / f"hook{others}", files)
    for k in range(others):  # another session, stopped with its intent open
        _hook(repo, _payload(repo, f"other-{k}", "PreToolUse", f"o{k}.txt", f"o{k}"))
    times = []
    for i in range(steps):
        pre = _hook(repo, _payload(repo, "main", "PreToolUse", f"f{i}.txt", f"c{i}"))
        (repo / f"f{i}.txt").write_text(f"c{i}\n")
        _hook(repo, _payload(repo, "main", "PostToolUse", f"f{i}.txt", f"c{i}"))
        times.append(pre)
    return Stats.of(times)


def check_cost(root: Path, others: int, rounds: int = 200) -> Stats:
    """In process, what a step adds: its path lock taken and let go, the scan of
    other runs' open intents and of claims (the rest of a step is unchanged)."""
    from gitwal import Wal
    from gitwal.claims import keep_off_claims
    from gitwal.log.others import open_step_on
    from gitwal.log.pathlocks import Holder, path_locks

    files = {"f.txt": b"x\n", **{f"o{k}.txt": b"x\n" for k in range(others)}}
    repo = init_repo(root / f"cost{others}", files)
    for k in range(others):
        _hook(repo, _payload(repo, f"other-{k}", "PreToolUse", f"o{k}.txt", f"o{k}"))
    w = Wal(repo)
    me = w.begin(run_id="me")
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with path_locks(w.repo, ["f.txt"], Holder(me.id, 2, "write_file", "")):
            assert open_step_on(w.repo, me.id, ["f.txt"]) is None
            keep_off_claims(w.repo, me.id, ["f.txt"])
        times.append(time.perf_counter() - t0)
    return Stats.of(times)


def exec_cost(root: Path, others: int, rounds: int = 50) -> tuple[Stats, Stats]:
    """In process, what a shell step adds (shell_among.py): at its intent, the
    other runs' newest LSNs; at its closing, ``theirs`` and ``claimed`` with
    every other run having committed one step on a path of its own while
    the shell step ran (the worst case: every run has something to read)."""
    from gitwal import Wal
    from gitwal.records.model import Intent
    from gitwal.shell_among import OTHERS_ARG, among, others_now

    repo = init_repo(root / f"exec{others}", {"f.txt": b"x\n"})
    w = Wal(repo)
    me = w.begin(run_id="me")
    runs = [w.begin(run_id=f"other-{k}") for k in range(others)]
    seen = others_now(w.repo, me.id)
    pre = me.wt.snapshot(me.id)
    for k, r in enumerate(runs):
        r.write_file(f"o{k}.txt", b"o\n")
    (repo / "mine.txt").write_text("mine\n")
    post = me.wt.snapshot(me.id)
    head = me.store.head()
    assert head is not None
    intent = Intent(me.id, me.store.head_records(head)[-1].lsn, "exec",
                    {"argv": ["true"], OTHERS_ARG: seen}, (".",), (pre,), None,
                    (0o040000,), "unsafe", "k")
    at_intent, at_close = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        others_now(w.repo, me.id)
        t1 = time.perf_counter()
        theirs, _claimed = among(w.repo, me.id, intent, post)
        t2 = time.perf_counter()
        assert len(theirs) == others
        at_intent.append(t1 - t0)
        at_close.append(t2 - t1)
    return Stats.of(at_intent), Stats.of(at_close)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--others", type=int, default=20)
    ap.add_argument("--exec-only", action="store_true",
                    help="only the in-process cost of a shell step among other runs")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seal_environment(root / "home", root / "pycache")
        for others in (0, opts.others):
            i, c = exec_cost(root, others)
            print(f"shell step, {others} other runs: intent {fmt_time(i.median)} "
                  f"(p90 {fmt_time(i.p90)}), closing {fmt_time(c.median)} "
                  f"(p90 {fmt_time(c.p90)})")
        if opts.exec_only:
            return
        a = apply_latency(root, opts.steps)
        print(f"apply (1 process at a time): median {fmt_time(a.median)} "
              f"p10 {fmt_time(a.p10)} p90 {fmt_time(a.p90)}")
        wall = parallel(root, opts.steps)
        print(f"parallel (2 runs x {opts.steps} applies): {wall:.2f} s wall")
        # A step's check runs under its locks: 0.5 s each, 2 runs x 5 steps.
        wall = parallel(root, 5, "sleep 0.5")
        print(f"parallel with a 0.5 s check (2 runs x 5 applies): {wall:.2f} s wall")
        for others in (0, opts.others):
            c = check_cost(root, others)
            print(f"checks in process, {others} other runs with an open intent: "
                  f"median {fmt_time(c.median)} p90 {fmt_time(c.p90)}")
        for others in (0, opts.others):
            h = hook_latency(root, opts.steps, others)
            print(f"hook PreToolUse, {others} other runs with an open intent: "
                  f"median {fmt_time(h.median)} p90 {fmt_time(h.p90)}")


if __name__ == "__main__":
    main()
