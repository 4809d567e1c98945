"""Claims that bind across clones (docs/remote-runs.md, "Claims across
clones"), against a real smart-HTTP server (tests/gitservers.py): one ref per
claimed path on the remote, taken by compare-and-swap; two clones racing for
one path (released together through FIFOs, never by sleeping); another
clone's step refused only under a claim a trusted key signed. Expiry is
driven through the library at the times the test names (the reader's clock
at each copy), never by waiting: a holder that keeps appending keeps its
claim, an idle one loses it after ttl + SKEW of the reader's watch, a holder
clock far off changes nothing; the holder's release, seal, takeover or drop
ends it even when its ref stays; a shell step is told of the claim it hit.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from gitwal import Wal
from gitwal.decisions import claiming
from gitwal.log.authorship import clone_id
from gitwal.remote import claim_seen
from gitwal.remote.claim_push import ClaimHeld, refresh
from gitwal.remote.claim_refs import SKEW, make_commit, ref_of
from gitwal.together.remote_claims import live_remote_claims

from .conftest import GIT_WAL, git, ok, wal
from .gitservers import HttpGitServer
from .test_agent_payloads import claude_run, claude_tool, run_hook, wal_log
from .test_json_schema import check
from .test_remote_replication import (
    Setup,
    _setup,
    _stop_pusher,
    local_head,
    remote_head,
    step,
    until,
)

ROUNDS = 10


@pytest.fixture
def http(http_git_server: HttpGitServer, tmp_path: Path) -> Iterator[Setup]:
    yield from _setup(http_git_server, tmp_path)


@pytest.fixture
def two(http: Setup) -> Iterator[tuple[Path, Path]]:
    """Clone A (the setup's) and clone B of one remote, each with wal.remote."""
    b = http.base / "b"
    git(http.base, "clone", "-q", http.server.url("logs.git"), str(b))
    git(b, "config", "wal.remote", "origin")
    git(b, "config", "wal.remote.linger", "5")
    try:
        yield http.clone, b
    finally:
        _stop_pusher(b)


def _id(clone: Path) -> str:
    return clone_id(pygit2.Repository(str(clone)))


def _begin(clone: Path, task: str) -> str:
    return ok(clone, "begin", "--task", task).strip()


def _remote_claim(bare: Path, pattern: str) -> str | None:
    out = git(bare, "for-each-ref", "--format=%(objectname)", ref_of(pattern)).strip()
    return out or None


def _race(clones: list[Path], base: Path, n: int) -> list[subprocess.CompletedProcess[str]]:
    """`git wal claim src/x.py` in every clone at once: each waits on its own
    FIFO; opening one for writing waits until its claimer is there; then all
    are closed together."""
    procs, fifos = [], []
    for i, clone in enumerate(clones):
        fifo = base / f"go-{n}-{i}"
        os.mkfifo(fifo)
        fifos.append(fifo)
        procs.append(subprocess.Popen(
            ["sh", "-c", f"read _ < '{fifo}'; exec '{GIT_WAL}' claim src/x.py --ttl 600"],
            cwd=clone, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    fds = [os.open(f, os.O_WRONLY) for f in fifos]  # each blocks until its reader is there
    for fd in fds:
        os.close(fd)  # end of file: every claimer goes now
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def test_two_clones_racing_for_one_path_one_wins_and_the_other_is_told_who(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    runs = {a: _begin(a, "task of a"), b: _begin(b, "task of b")}
    ids = {a: _id(a), b: _id(b)}
    assert ids[a] != ids[b]
    for n in range(ROUNDS):
        done = _race([a, b], http.base, n)
        won = [c for c, p in zip((a, b), done, strict=True) if p.returncode == 0]
        assert len(won) == 1, [p.stderr for p in done]
        winner = won[0]
        loser, lost = next((c, p) for c, p in zip((a, b), done, strict=True) if c != winner)
        assert "error:" in lost.stderr and "hint:" in lost.stderr
        assert runs[winner] in lost.stderr and ids[winner] in lost.stderr
        assert f"task of {'a' if winner == a else 'b'}" in lost.stderr
        assert runs[loser] not in lost.stderr.split("hint:")[0]
        head = _remote_claim(http.bare, "src/x.py")
        assert head is not None
        blob = json.loads(git(http.bare, "show", f"{head}:claim.json"))
        assert blob["run"] == runs[winner] and blob["clone"] == ids[winner]
        # the loser holds nothing, here either
        doc = json.loads(ok(loser, "runs", "--json"))
        assert [r["claims"] for r in doc] == [[]]
        ok(winner, "release")
        assert _remote_claim(http.bare, "src/x.py") is None


def test_identical_claims_in_the_same_second_do_not_both_succeed(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    for clone in (a, b):
        ok(clone, "begin", "--run", "same-run", "--task", "same task")
    at = 1_900_000_000
    ra = Wal(str(a)).run("same-run")
    rb = Wal(str(b)).run("same-run")
    claiming.claim(ra, ["src/x.py"], 600, now=at)
    with pytest.raises(ClaimHeld, match="same-run"):
        claiming.claim(rb, ["src/x.py"], 600, now=at)
    # The nonce: one clone making one claim twice makes two commits.
    repo = pygit2.Repository(str(a))
    one, two_ = (make_commit(repo, run="r", clone="c", task="t", pattern="p", at=at, ttl=1,
                             lsn=2, parent=None, signer=None) for _ in range(2))
    assert one != two_


def _keys(a: Path, b: Path, base: Path) -> None:
    """A signs with its key; B trusts it (its own allowed-signers file)."""
    key = base / "keys" / "a_key"
    ok(a, "keygen", "--path", str(key), "--configure")
    allowed = base / "b_allowed"
    ok(b, "trust", "add", f"{key}.pub", "--name", "a@test", "--file", str(allowed))
    git(b, "config", "gpg.ssh.allowedSignersFile", str(allowed))


def _records(clone: Path, run: str) -> list[dict[str, object]]:
    proc = wal(clone, "log", "--run", run, "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("trusted", [True, False])
def test_a_trusted_claim_of_another_clone_refuses_a_step_before_its_intent(
        http: Setup, two: tuple[Path, Path], trusted: bool) -> None:
    a, b = two
    if trusted:
        _keys(a, b, http.base)
    run_a = _begin(a, "owns a.txt")
    ok(a, "claim", "a.txt")
    run_b = _begin(b, "wants a.txt")
    ok(b, "fetch", "origin")
    before = _records(b, run_b)
    proc = wal(b, "apply", "write-file", "a.txt", input=b"theirs\n")
    if trusted:
        assert proc.returncode != 0
        for said in (run_a, _id(a), "owns a.txt", "error:", "hint:"):
            assert said in proc.stderr
        assert _records(b, run_b) == before  # refused before its intent
        assert (b / "a.txt").read_text() == "0\n"
        # Claude Code's Edit is refused the same way, before its intent
        edit = {"file_path": str(b / "a.txt"), "old_string": "0", "new_string": "1"}
        r = run_hook(b, "claude", claude_tool(b, "PreToolUse", "Edit", edit, "t1"))
        assert r.code == 2 and run_a in r.err and _id(a) in r.err, r.err
        assert not [x for x in wal_log(b, claude_run()) if x["type"] == "intent"]
    else:
        assert proc.returncode == 0, proc.stderr
        assert "warning:" in proc.stderr and run_a in proc.stderr
        assert (b / "a.txt").read_text() == "theirs\n"
    # the holder's own clone is never refused by its own claim
    ok(a, "apply", "write-file", "a.txt", input=b"mine\n")


def test_release_deletes_the_remote_ref_and_the_other_clone_may_claim(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    _begin(a, "first")
    run_b = _begin(b, "second")
    ok(a, "claim", "docs/*")
    assert _remote_claim(http.bare, "docs/*") is not None
    refused = wal(b, "claim", "docs/*")
    assert refused.returncode != 0
    assert [r["claims"] for r in json.loads(ok(b, "runs", "--json"))] == [[]]
    ok(a, "release")
    assert _remote_claim(http.bare, "docs/*") is None
    ok(b, "claim", "docs/*")
    head = _remote_claim(http.bare, "docs/*")
    assert head is not None
    assert json.loads(git(http.bare, "show", f"{head}:claim.json"))["run"] == run_b


def test_a_refused_claim_takes_nothing_and_keeps_what_the_run_held(
        http: Setup, two: tuple[Path, Path]) -> None:
    """One atomic push: of `y` (the run's already) and `x` (another's), none
    moves; the run still holds `y`, here and on the remote."""
    a, b = two
    run_a = _begin(a, "x")
    run_b = _begin(b, "y")
    ok(a, "claim", "x")
    ok(b, "claim", "y")
    y = _remote_claim(http.bare, "y")
    refused = wal(b, "claim", "y", "x")
    assert refused.returncode != 0 and run_a in refused.stderr
    assert _remote_claim(http.bare, "y") == y
    held = [r["claims"] for r in json.loads(ok(b, "runs", "--json")) if r["run"] == run_b]
    assert [[c["path"] for c in h] for h in held] == [["y"]]


def test_an_expired_claim_is_replaced_by_compare_and_swap(
        http: Setup, two: tuple[Path, Path]) -> None:
    """B watched A's claim and A's log stay unchanged for ttl + SKEW of B's
    clock: B's claim replaces it, a fast-forward from its commit. B's times
    are in the past, so its own pusher (copying at the time now) only
    confirms the expiry."""
    a, b = two
    run_a = _begin(a, "idle")
    run_b = _begin(b, "now")
    claiming.claim(Wal(str(a)).run(), ["src/x.py"], 60)
    _on_remote(http, a, run_a)
    old = _remote_claim(http.bare, "src/x.py")
    assert old is not None
    t = int(time.time()) - 10_000
    for now in (t, t + 60 + SKEW - 1):
        assert refresh(pygit2.Repository(str(b)), "origin", now=now) is None
    assert refresh(pygit2.Repository(str(b)), "origin", now=t + 60 + SKEW) is None
    claiming.claim(Wal(str(b)).run(), ["src/x.py"], 600)
    new = _remote_claim(http.bare, "src/x.py")
    assert new is not None and new != old
    assert json.loads(git(http.bare, "show", f"{new}:claim.json"))["run"] == run_b
    assert git(http.bare, "rev-parse", f"{new}^").strip() == old  # a fast-forward


def _on_remote(http: Setup, clone: Path, run: str) -> None:
    until(f"{run} on the remote", lambda: remote_head(http.bare, run) == local_head(clone, run))


def _observer(http: Setup) -> Path:
    """A clone of the remote that never pushes (no `wal.remote`): its copies
    of the claims happen only when the test makes them, at the times it names."""
    c = http.base / "c"
    git(http.base, "clone", "-q", http.server.url("logs.git"), str(c))
    return c


def _holding(clone: Path, now: int) -> list[tuple[str, str]]:
    """Copy the remote's claims at ``now`` (the clone's clock, as the test
    names it); the claims that hold then, by pattern and run."""
    repo = pygit2.Repository(str(clone))
    assert refresh(repo, "origin", now=now) is None
    return [(c.pattern, c.run) for c, _trusted in live_remote_claims(repo)]


T = 1_800_000_000  # the observer's clock, as the tests set it


def test_a_holder_that_keeps_appending_keeps_its_claim_and_an_idle_one_expires(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, _b = two
    run_a = _begin(a, "busy")
    claiming.claim(Wal(str(a)).run(), ["src/x.py"], 60)
    _on_remote(http, a, run_a)
    c = _observer(http)
    held = [("src/x.py", run_a)]
    assert _holding(c, T) == held
    t = T
    for i in range(3):  # appends on the remote: each one watched afresh
        step(a, f"{i}\n")
        _on_remote(http, a, run_a)
        t += 150
        assert _holding(c, t) == held  # 450 s after first sight, its ttl 60
    assert _holding(c, t + 60 + SKEW - 1) == held
    assert _holding(c, t + 60 + SKEW) == []  # idle for ttl + SKEW of this clone's clock
    step(a, "again\n")  # it appends again: the claim holds again, watched afresh
    _on_remote(http, a, run_a)
    assert _holding(c, t + 60 + SKEW + 1) == held


@pytest.mark.parametrize("at", [1_000_000_000, 4_000_000_000], ids=["past", "future"])
def test_the_holder_s_clock_neither_ends_nor_prolongs_its_claim(
        http: Setup, two: tuple[Path, Path], at: int) -> None:
    """A claim commit written by hand with `at` in 2001 or in 2096: it holds
    for ttl + SKEW of the reader's watch, no less and no more."""
    a, _b = two
    run_a = _begin(a, "skewed")
    ok(a, "claim", "src/x.py", "--ttl", "60")
    _on_remote(http, a, run_a)
    real = _remote_claim(http.bare, "src/x.py")
    assert real is not None
    lsn = json.loads(git(http.bare, "show", f"{real}:claim.json"))["lsn"]
    repo = pygit2.Repository(str(a))
    forged = make_commit(repo, run=run_a, clone=_id(a), task="skewed", pattern="src/x.py",
                         at=at, ttl=60, lsn=lsn, parent=real, signer=None)
    git(a, "push", "-q", "origin", f"{forged}:{ref_of('src/x.py')}")
    assert _remote_claim(http.bare, "src/x.py") == forged
    c = _observer(http)
    ok(c, "begin", "--task", "observer")
    now = int(time.time())
    for t in (now, now + 60 + SKEW - 1):
        assert _holding(c, t) == [("src/x.py", run_a)]
    # the step gate reads the same rule: the step warns while the claim holds
    proc = wal(c, "apply", "write-file", "src/x.py", input=b"c\n")
    assert proc.returncode == 0 and "warning:" in proc.stderr and run_a in proc.stderr
    assert _holding(c, now + 60 + SKEW) == []
    proc = wal(c, "apply", "write-file", "src/x.py", input=b"c2\n")
    assert proc.returncode == 0 and run_a not in proc.stderr, proc.stderr


@pytest.mark.parametrize("how", ["release", "seal", "takeover", "drop"])
def test_a_claim_ends_with_its_run_even_when_its_ref_stays(
        http: Setup, two: tuple[Path, Path], how: str) -> None:
    """The ref kept on the remote (a deletion that did not reach it is put
    back by hand): the holder's log, as fetched, ends the claim at once."""
    a, b = two
    if how == "seal":
        ok(a, "keygen", "--path", str(http.base / "keys" / "a_key"), "--configure")
    run_a = _begin(a, "ends")
    ok(a, "claim", "src/x.py")
    _on_remote(http, a, run_a)
    kept = _remote_claim(http.bare, "src/x.py")
    assert kept is not None
    c = _observer(http)
    assert _holding(c, T) == [("src/x.py", run_a)]
    if how == "release":
        ok(a, "release")
    elif how == "seal":
        ok(a, "seal")
    elif how == "takeover":
        ok(b, "resume", run_a)
    if how == "drop":
        git(http.bare, "update-ref", "-d", f"refs/wal/{run_a}")
    else:
        _on_remote(http, b if how == "takeover" else a, run_a)
    git(http.bare, "update-ref", ref_of("src/x.py"), kept)  # as if never deleted
    assert _holding(c, T + 1) == []


def test_a_shell_step_in_another_clone_is_told_of_the_claim_it_hit(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    run_a = _begin(a, "owns a.txt")
    ok(a, "claim", "a.txt")
    run_b = _begin(b, "a shell step")
    ok(b, "fetch", "origin")
    proc = wal(b, "exec", "--", "sh", "-c", "echo theirs > a.txt; echo free > b.txt")
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if "warning:" in ln]
    assert len(said) == 1, proc.stderr
    for part in (run_a, _id(a), "owns a.txt", "a.txt", "shell step"):
        assert part in said[0]
    closing = [r for r in _records(b, run_b) if r["type"] == "commit"][-1]
    assert not closing.get("claimed")  # a claim ref is no record verify could check
    verify = wal(b, "verify", "--run", run_b)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_an_unreachable_remote_fails_the_claim_and_a_release_s_claim_ends_with_its_log(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    _begin(a, "holder")
    run_b = _begin(b, "cut off")
    ok(a, "claim", "a.txt")
    url = git(a, "remote", "get-url", "origin").strip()
    for clone in (a, b):
        git(clone, "remote", "set-url", "origin", "http://127.0.0.1:9/nothing.git")
    failed = wal(b, "claim", "b.txt")
    assert failed.returncode != 0
    assert "error:" in failed.stderr and "hint:" in failed.stderr
    assert "local claim was released" in failed.stderr
    doc = json.loads(ok(b, "runs", "--json"))
    assert [r["claims"] for r in doc if r["run"] == run_b] == [[]]
    released = wal(a, "release")
    assert released.returncode == 0, released.stderr
    assert "warning:" in released.stderr and "until they expire" in released.stderr
    assert _remote_claim(http.bare, "a.txt") is not None  # the ref stays
    _stop_pusher(a)  # A's release stays off the remote until A pushes it
    git(a, "remote", "set-url", "origin", url)
    git(b, "remote", "set-url", "origin", url)
    assert wal(b, "claim", "a.txt").returncode != 0  # held: nothing on the remote ends it
    ok(a, "push")  # A's log, its release in it, reaches the remote: the claim ended
    ok(b, "claim", "a.txt")
    head = _remote_claim(http.bare, "a.txt")
    assert head is not None
    assert json.loads(git(http.bare, "show", f"{head}:claim.json"))["run"] == run_b


def test_dropping_a_run_deletes_its_claims_on_the_remote(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    run_a = _begin(a, "dropped")
    _begin(b, "next")
    ok(a, "claim", "a.txt", "docs/*")
    assert _remote_claim(http.bare, "a.txt") and _remote_claim(http.bare, "docs/*")
    ok(a, "drop", run_a)
    assert _remote_claim(http.bare, "a.txt") is None
    assert _remote_claim(http.bare, "docs/*") is None
    ok(b, "claim", "a.txt", "docs/*")


def test_a_run_taken_over_holds_no_claim_of_the_clone_it_left(
        http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    run_a = _begin(a, "moves on")
    ok(a, "claim", "a.txt")
    until("A's run on the remote",
          lambda: remote_head(http.bare, run_a) == local_head(a, run_a))
    assert _remote_claim(http.bare, "a.txt") is not None
    ok(b, "resume", run_a)
    assert _remote_claim(http.bare, "a.txt") is None


def test_runs_json_lists_the_remote_claims(http: Setup, two: tuple[Path, Path]) -> None:
    a, b = two
    run_a = _begin(a, "holder")
    _begin(b, "reader")
    ok(a, "claim", "src/*", "--ttl", "900")
    ok(b, "fetch", "origin")
    doc = check(json.loads(ok(b, "runs", "--json")), "runs")
    listed = doc[0]["remote_claims"]
    assert [(c["pattern"], c["run"], c["clone"], c["task"], c["ttl"], c["trusted"])
            for c in listed] == [("src/*", run_a, _id(a), "holder", 900, False)]
    text = ok(b, "runs")
    assert "src/*" in text and run_a in text


def test_a_copy_dated_before_a_claims_first_sight_starts_its_watch_again(
        tmp_path: Path) -> None:
    """This clone's clock set back between two copies: the watch restarts at
    the earlier time rather than counting from a first sight in its future."""
    common = tmp_path / "common"
    common.mkdir()
    c, h = "a" * 40, "b" * 40
    ref = ref_of("src/x.py")
    claim_seen.observe(common, "origin", 10_000, {ref: (c, h)})
    seen = claim_seen.observe(common, "origin", 5_000, {ref: (c, h)})
    assert seen.claims[ref].first == 5_000
    later = claim_seen.observe(common, "origin", 5_000 + 180, {ref: (c, h)})
    assert later.copied is not None and later.copied - later.claims[ref].first == 180
