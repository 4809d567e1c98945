"""Several runs on one tree: what keeping them off each other's paths costs
(docs/agents-together.md). The pieces `make bench` §10 (bench/agents_together.py)
is built from, and a standalone run of them:

* ``apply``: one `git wal apply write-file` process at a time, each on its
  own file (the single step's latency);
* ``parallel``: two runs, each a loop of `git wal apply` processes on files of
  its own, both loops at once (wall time for all the steps);
* ``checks``: in process, the guard alone (:func:`gitwal.together.claims.kept_off_others`:
  path lock, scans), to explain the whole-process numbers;
* ``parallel with a check``: the same with a 0.5 s ``--check`` per step (a
  check runs while the step holds its locks);
* ``shell step``: in process, what a shell step adds among ``--others`` runs
  (shell_among.py): the other runs' LSNs at its intent, ``theirs`` and
  ``claimed`` at its closing, each other run having committed a step meanwhile;
* ``hook``: `git wal hook claude` for an Edit's PreToolUse, with ``--others``
  other live runs in the repository, each holding a claim and an open agent
  intent on files of its own (the scans' worst case).

Run: ``python -m bench.many_runs [--steps N] [--others R] [--exec-only]``; compare two
builds by running it with each on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import GIT_WAL, Stats, fmt_time, seal_environment, sh
from bench.fixtures import init_repo

Payload = dict[str, object]
Hook = Callable[[Path, Payload], float]  # one hook call, its seconds


def apply(repo: Path, run: str, path: str, data: bytes) -> float:
    """One `git wal apply write-file` process, timed whole."""
    t0 = time.perf_counter()
    subprocess.run([GIT_WAL, "apply", "--run", run, "write-file", path], cwd=repo,
                   input=data, check=True, capture_output=True)
    return time.perf_counter() - t0


def apply_latency(root: Path, steps: int) -> Stats:
    repo = init_repo(root / "apply", {f"f{i}.txt": b"x\n" for i in range(steps)})
    sh("git-wal", "begin", "--run", "a", cwd=repo)
    apply(repo, "a", "warm.txt", b"w\n")
    return Stats.of([apply(repo, "a", f"f{i}.txt", f"{i}\n".encode()) for i in range(steps)])


def parallel(root: Path, steps: int, check: str = "", runs: int = 2) -> float:
    """Wall seconds for ``runs`` loops of ``steps`` `git wal apply` processes,
    each run on files of its own, all loops at once."""
    repo = init_repo(Path(tempfile.mkdtemp(prefix=f"parallel{runs}-", dir=root)),
                     {"README": b"r\n"})
    names = [f"r{k}" for k in range(runs)]
    for run in names:
        sh("git-wal", "begin", "--run", run, cwd=repo)
    opt = f"--check '{check}' " if check else ""
    loop = ("for i in $(seq 1 {n}); do echo $i | git-wal apply --run {r} " + opt +
            "write-file {r}-$i.txt >/dev/null || exit 1; done")
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["sh", "-c", loop.format(n=steps, r=r)], cwd=repo)
             for r in names]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("a parallel apply failed")
    return time.perf_counter() - t0


def hook(repo: Path, payload: Payload) -> float:
    """One `git wal hook claude` process, timed whole (payload on stdin)."""
    data = json.dumps(payload).encode()
    t0 = time.perf_counter()
    proc = subprocess.run([GIT_WAL, "hook", "claude"], cwd=repo, input=data,
                          capture_output=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode())
    return seconds


def hook_in_process(repo: Path, payload: Payload) -> float:
    """The same call in this process: :func:`gitwal.agents.hook.run_hook`, the
    function `git wal hook claude` and the hook server run."""
    from gitwal.agents.hook import run_hook

    data = json.dumps(payload).encode()
    t0 = time.perf_counter()
    code, _out, err = run_hook("claude", data, cwd=str(repo))
    seconds = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(err)
    return seconds


def payload(repo: Path, session: str, event: str, path: str, old: str,
            new: str, call: str) -> Payload:
    """Claude Code's payload for an Edit of ``path`` (``old`` to ``new``)."""
    out: Payload = {
        "session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(repo),
        "permission_mode": "default", "hook_event_name": event, "tool_name": "Edit",
        "tool_input": {"file_path": str(repo / path), "old_string": old, "new_string": new},
        "tool_use_id": call}
    if event == "PostToolUse":
        out["tool_response"] = {"filePath": str(repo / path), "success": True}
    return out


def edit_step(repo: Path, session: str, path: str, call: str, run_hook: Hook) -> float:
    """One Edit as Claude Code makes it: PreToolUse, the write, PostToolUse.
    The file holds one word; the Edit replaces it with ``call``. Returns the
    seconds of the two hook calls and the write."""
    target = repo / path
    old = target.read_text().strip()
    t0 = time.perf_counter()
    run_hook(repo, payload(repo, session, "PreToolUse", path, old, call, call))
    target.write_text(f"{call}\n")
    run_hook(repo, payload(repo, session, "PostToolUse", path, old, call, call))
    return time.perf_counter() - t0


def add_others(repo: Path, count: int) -> None:
    """``count`` other agent sessions, each left with a claim of a file of its
    own and, newest, an open intent on another: both scans' worst case, as
    neither names a path of the steps measured (in process, set-up only)."""
    from gitwal import Wal
    from gitwal.agents.session import run_id_for
    from gitwal.decisions.claiming import claim

    for k in range(count):
        sid, path = f"other-{k}", f"o{k}.txt"
        (repo / path).write_text("x\n")
        edit_step(repo, sid, path, f"o{k}a", hook_in_process)  # the run begins
        claim(Wal(repo).run(run_id_for("claude", sid)), [f"o{k}-claimed.txt"])
        hook_in_process(repo, payload(repo, sid, "PreToolUse", path, f"o{k}a", f"o{k}b",
                                      f"o{k}b"))  # stopped with its intent open


def hook_latency(root: Path, steps: int, others: int) -> Stats:
    repo = init_repo(root / f"hook{others}", {f"f{i}.txt": b"x\n" for i in range(steps)})
    add_others(repo, others)
    times = []
    for i in range(steps):
        pre = hook(repo, payload(repo, "main", "PreToolUse", f"f{i}.txt", "x", f"c{i}", f"c{i}"))
        (repo / f"f{i}.txt").write_text(f"c{i}\n")
        hook(repo, payload(repo, "main", "PostToolUse", f"f{i}.txt", "x", f"c{i}", f"c{i}"))
        times.append(pre)
    return Stats.of(times)


def guard(repo: Path, run: str) -> Callable[[], None]:
    """In process, what a step of ``run`` on ``mine.txt`` adds for other runs:
    the guard taken and let go (its path lock, the scan of other runs' open
    intents, the claims look-up); the rest of a step is unchanged."""
    from gitwal.base.repository import open_repository
    from gitwal.together.claims import kept_off_others
    from gitwal.together.pathlocks import Holder

    git = open_repository(repo)

    def once() -> None:
        with kept_off_others(git, Holder(run, 2, "write_file", ""), ["mine.txt"]):
            pass
    return once


def check_cost(root: Path, others: int, rounds: int = 200) -> Stats:
    from gitwal import Wal

    repo = init_repo(root / f"cost{others}", {"mine.txt": b"x\n"})
    add_others(repo, others)
    once = guard(repo, Wal(repo).begin(run_id="me").id)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return Stats.of(times)


def exec_cost(root: Path, others: int, rounds: int = 50) -> tuple[Stats, Stats]:
    """In process, what a shell step adds (shell_among.py): at its intent, the
    other runs' newest LSNs; at its closing, ``theirs`` and ``claimed`` with
    every other run having committed one step on a path of its own while
    the shell step ran (the worst case: every run has something to read)."""
    from gitwal import Wal
    from gitwal.records.model import Intent
    from gitwal.together.shell_among import OTHERS_ARG, among, others_now

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


def agents_at_once(root: Path, agents: int, steps: int) -> float:
    """Wall seconds for ``agents`` sessions, each ``steps`` Edits (whole
    `git wal hook claude` processes) on files of its own, all at once."""
    files = {f"a{k}-{i}.txt": b"x\n" for k in range(agents) for i in range(steps)}
    repo = init_repo(Path(tempfile.mkdtemp(prefix=f"agents{agents}-", dir=root)), files)
    start = threading.Barrier(agents + 1)
    failed: list[BaseException] = []

    def agent(k: int) -> None:
        start.wait()
        try:
            for i in range(steps):
                edit_step(repo, f"agent-{k}", f"a{k}-{i}.txt", f"c{i}", hook)
        except BaseException as e:  # reported by the caller
            failed.append(e)

    threads = [threading.Thread(target=agent, args=(k,)) for k in range(agents)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if failed:
        raise RuntimeError(f"an agent's step failed: {failed[0]}")
    return time.perf_counter() - t0


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
            print(f"checks in process, {others} other runs with a claim and an open intent: "
                  f"median {fmt_time(c.median)} p90 {fmt_time(c.p90)}")
        for others in (0, opts.others):
            h = hook_latency(root, opts.steps, others)
            print(f"hook PreToolUse, {others} other runs with a claim and an open intent: "
                  f"median {fmt_time(h.median)} p90 {fmt_time(h.p90)}")


if __name__ == "__main__":
    main()
