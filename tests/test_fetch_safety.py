"""`git wal fetch` from a hostile or broken remote: a live log is never
replaced by a chain that does not continue it, and nothing that fails the
chain checks is integrated. The remote is changed behind gitwal's back with
git plumbing in the server repository (what anyone with access could do)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .conftest import git, ok, wal
from .test_remotes import _bare, _clone, _run_with_step, _statuses

GITWAL = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
          for what, value in (("NAME", "gitwal"), ("EMAIL", "gitwal@localhost"))}


def _fetch(repo: Path, code: int) -> tuple[dict[str, str], str]:
    proc = wal(repo, "fetch", "--json")
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    return _statuses(json.loads(proc.stdout)), proc.stderr


def _head(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def _setup(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A server, a writer `a` that pushed a run, a reader `b` that fetched it."""
    server = _bare(tmp_path, "origin.git")
    a = _clone(tmp_path, server.as_uri(), "a")
    b = _clone(tmp_path, server.as_uri(), "b")
    run = _run_with_step(a, "shared")
    ok(a, "push")
    ok(b, "fetch")
    return server, a, b, run


def test_a_planted_archive_does_not_let_an_unrelated_chain_replace_the_log(
        tmp_path: Path) -> None:
    server, _a, b, run = _setup(tmp_path)
    live = f"refs/wal/{run}"
    ours = _head(b, live)
    # Another clone writes a run of the same id: a valid log, but not ours.
    forger = _clone(tmp_path, server.as_uri(), "forger")
    ok(forger, "begin", "--run", run, "--task", "forged")
    ok(forger, "apply", "write-file", "forged.txt", "--from", "-", input=b"forged\n")
    forged = _head(forger, live)
    # On the server, past its hook: the forged chain as the live log, and an
    # archive that "keeps" the reader's head, as a compaction would.
    git(server, "fetch", "-q", str(forger), f"+{live}:{live}")
    git(server, "update-ref", f"refs/wal-archive/{run}/1", ours)

    statuses, stderr = _fetch(b, 1)
    assert statuses[live] == "diverged"
    assert _head(b, live) == ours  # unchanged
    assert _head(b, f"refs/wal-remote/origin/wal/{run}") == forged  # staged, for inspection
    assert f"error: {live}: diverged" in stderr
    assert "LSN 1 differs between" in stderr
    assert "hint: nothing was overwritten" in stderr
    assert "shared" in ok(b, "log", "--run", run) and "forged" not in ok(b, "log", "--run", run)


def _bad_append(server: Path, parent: str, name: str, data: bytes) -> str:
    """An append commit on ``parent`` whose one record blob holds ``data``."""
    blob = git(server, "hash-object", "-w", "--stdin", input=data).strip()
    tree = git(server, "mktree", input=f"100644 blob {blob}\t{name}\n".encode()).strip()
    proc = subprocess.run(["git", "commit-tree", tree, "-p", parent, "-m", "append"],
                          cwd=server, env={**os.environ, **GITWAL}, check=True,
                          capture_output=True, text=True)
    return proc.stdout.strip()


def test_a_corrupt_fetched_record_is_not_integrated(tmp_path: Path) -> None:
    server, _a, b, run = _setup(tmp_path)
    live = f"refs/wal/{run}"
    ours = _head(b, live)
    lsns = [json.loads(line)["lsn"] for line in
            ok(b, "log", "--run", run, "--json").splitlines()]
    name = f"{max(lsns) + 1:012d}.json"
    bad = _bad_append(server, ours, name, b'{"not": "a record"}\n')
    git(server, "update-ref", live, bad)

    statuses, stderr = _fetch(b, 1)
    assert statuses[live] == "invalid"
    assert _head(b, live) == ours
    assert _head(b, f"refs/wal-remote/origin/wal/{run}") == bad
    assert f"error: {live}: invalid" in stderr
    assert "hint: nothing was integrated" in stderr
    assert "record format version None is not supported" in stderr

    # A clone with no log of the run does not take it either.
    c = _clone(tmp_path, server.as_uri(), "c")
    statuses, _ = _fetch(c, 1)
    assert statuses[live] == "invalid"
    assert git(c, "for-each-ref", "refs/wal/").strip() == ""


def test_a_fetched_chain_with_a_gap_is_not_integrated(tmp_path: Path) -> None:
    server, a, b, run = _setup(tmp_path)
    live = f"refs/wal/{run}"
    ours = _head(b, live)
    # A real record of a later LSN, appended where the next LSN should be.
    ok(a, "apply", "ensure-line", "shared.txt", "two")
    ok(a, "apply", "ensure-line", "shared.txt", "three")
    rows = [json.loads(line) for line in ok(a, "log", "--run", run, "--json").splitlines()]
    last = rows[-1]["lsn"]
    tip = _head(a, live)
    data = git(a, "cat-file", "blob", f"{tip}:{last:012d}.json").encode()
    git(server, "fetch", "-q", str(a), f"+{live}:refs/tmp")  # the objects, not the ref
    bad = _bad_append(server, ours, f"{last:012d}.json", data)
    git(server, "update-ref", live, bad)

    statuses, stderr = _fetch(b, 1)
    assert statuses[live] == "invalid"
    assert "missing" in stderr
    assert _head(b, live) == ours


def test_fast_forward_and_compaction_still_integrate(tmp_path: Path) -> None:
    _server, a, b, run = _setup(tmp_path)
    live = f"refs/wal/{run}"
    ok(a, "apply", "ensure-line", "shared.txt", "more")
    ok(a, "push")
    statuses, _ = _fetch(b, 0)
    assert statuses[live] == "updated"
    assert _head(b, live) == _head(a, live)

    # The remote appends past b's head, then compacts: the archive keeps a
    # descendant of b's head, and the new chain joins it.
    ok(a, "checkpoint", "--detached")
    ok(a, "apply", "ensure-line", "shared.txt", "after the checkpoint")
    ok(a, "compact")
    ok(a, "push")
    statuses, _ = _fetch(b, 0)
    assert statuses[live] == "compacted"
    assert statuses[f"refs/wal-archive/{run}/1"] == "created"
    assert _head(b, live) == _head(a, live)
    assert ok(b, "log", "--all", "--run", run) == ok(a, "log", "--all", "--run", run)
