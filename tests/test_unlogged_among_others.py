"""Another run's logged step, noticed by an agent run's expectation, is named
as that run's (``theirs`` of the ``unlogged`` record, shell_among.py), not
taken for someone's unlogged edit: the Stop rule lets the turn end, `git wal
log` says whose it is, and verify checks the attribution against that log."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2

from gitwal.base.ids import Lsn, RunId
from gitwal.log.store import Store
from gitwal.records.model import Unlogged

from .conftest import ok, wal
from .test_agent_done import RUN, records, start, stop, write


def test_another_runs_step_is_named_not_unlogged(repo: Path) -> None:
    start(repo)
    write(repo, "a.txt", "a\n", "toolu_1")
    ok(repo, "begin", "--run", "b", "--task", "tidy")
    ok(repo, "apply", "--run", "b", "write-file", "README", input=b"by b\n")
    (repo / "c.txt").write_text("a person's edit\n")
    r = stop(repo)
    assert r.code == 2, r.err  # the person's edit is named to the model ...
    assert "1 path(s) changed with no logged step explaining them (c.txt)" in r.err
    assert "README" not in r.err  # ... b's logged step is not
    [seen] = [u for u in records(repo, "unlogged") if u["noticed"] == "Stop check"]
    assert seen["paths"] == ["README", "c.txt"]
    assert seen["theirs"] == [["README", "b", 2]]
    log = ok(repo, "log", "--run", RUN)
    assert "changed by other runs: README by run b LSN 2" in log
    assert "changed without an intent: c.txt" in log
    assert json.loads(ok(repo, "verify", "--all", "--json"))["ok"]

    # Only b's change: nothing to name, the turn ends.
    ok(repo, "apply", "--run", "b", "write-file", "README", input=b"by b, again\n")
    r = stop(repo, active=True)
    assert (r.code, r.err) == (0, ""), r.err


def test_verify_refuses_a_false_attribution(repo: Path) -> None:
    ok(repo, "begin", "--run", "a")
    ok(repo, "begin", "--run", "b")
    ok(repo, "apply", "--run", "b", "write-file", "README", input=b"by b\n")
    store = Store(pygit2.Repository(str(repo)), RunId("a"))
    forged = Unlogged(RunId("a"), Lsn(2), ("README",), ("0" * 40,), ("1" * 40,), "a look",
                      (("README", "b", 2),))
    store.append([forged], [], store.head())
    proc = wal(repo, "verify", "--run", "a")
    assert proc.returncode == 1
    assert ("a LSN 2: among: LSN 2: unlogged README names run b LSN 2, which did not "
            "leave it as found") in proc.stdout, proc.stdout
