"""Claims: a run reserves paths; other runs' steps on them are refused (or warned
about), until the claim expires, is released, or its run is sealed or dropped.
Expiry is tested with explicit times (``now`` passed in), never by waiting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitwal import Wal
from gitwal.base.errors import CorruptLog, ToolRefused
from gitwal.base.repository import open_repository
from gitwal.decisions import claiming
from gitwal.records.codec import decode, encode
from gitwal.records.model import Claim, Seal
from gitwal.together import claims
from gitwal.together.pathlocks import Holder, PathBusy

from .conftest import git, ok, wal
from .test_agent_payloads import claude_run, claude_tool, run_hook, wal_log
from .test_json_schema import check

T0 = 1_800_000_000


def test_a_claim_refuses_other_runs_steps_until_it_expires(repo: Path) -> None:
    w = Wal(repo)
    a = w.begin(task="docs", run_id="a")
    b = w.begin(task="code", run_id="b")
    rec, overlaps = claiming.claim(a, ["README", "docs/*"], ttl=60, now=T0)
    assert rec.lsn == 2 and overlaps == []
    for path in ("README", "docs/x/y.md"):
        with pytest.raises(PathBusy, match="claimed by run a"):
            claims.keep_off_claims(b.store.repo, b.id, [path], now=T0 + 59)
        claims.keep_off_claims(b.store.repo, b.id, [path], now=T0 + 60)  # expired
        claims.keep_off_claims(a.store.repo, a.id, [path], now=T0)  # its own run
    claims.keep_off_claims(b.store.repo, b.id, ["src/a.py"], now=T0)  # not claimed
    # A step (which takes the time itself) is refused before its intent.
    now_claimed, _ = claiming.claim(a, ["LICENSE"])
    with pytest.raises(PathBusy, match="LICENSE is claimed by run a"):
        b.write_file("LICENSE", b"x\n")
    assert not (repo / "LICENSE").exists() and len(b.records()) == 1
    assert now_claimed.ttl == claims.DEFAULT_TTL


def test_release_seal_and_drop_end_claims(repo: Path) -> None:
    w = Wal(repo)
    a = w.begin(run_id="a")
    claiming.claim(a, ["README", "x.txt"], ttl=600, now=T0)
    assert [c.pattern for c in claims.run_claims(a.store.repo, "a", T0)] == ["README", "x.txt"]
    rel = claiming.release(a, ["x.txt"], now=T0 + 1)
    assert rel is not None and rel.ttl == 0 and rel.paths == ("x.txt",)
    assert [c.pattern for c in claims.run_claims(a.store.repo, "a", T0 + 1)] == ["README"]
    assert claiming.release(a, ["nothing-claimed"], now=T0 + 1) is None
    # A claim again replaces the earlier one (a new ttl from its own time).
    claiming.claim(a, ["README"], ttl=10, now=T0 + 2)
    [live] = claims.run_claims(a.store.repo, "a", T0 + 2)
    assert live.until == T0 + 12
    # A seal ends every claim of its run (a real seal needs a signing key:
    # tests/test_seal.py; the fold is what every reader of claims uses).
    seal = Seal("a", 99, 98, "0" * 40, "0" * 40)  # type: ignore[arg-type]
    assert claims.fold([*a.records(), seal], T0 + 3) == []
    assert claims.fold(a.records(), T0 + 3) != []
    ok(repo, "drop", "a")
    assert claims.run_claims(a.store.repo, "a", T0 + 3) == []


def test_no_claim_after_an_open_intent_and_bad_patterns_are_refused(repo: Path) -> None:
    a = Wal(repo).begin(run_id="a")
    with pytest.raises(ToolRefused):
        claiming.claim(a, ["../etc/passwd"])
    with pytest.raises(ToolRefused):
        claiming.claim(a, [".git/config"])
    with pytest.raises(ToolRefused):
        claiming.claim(a, ["a"], ttl=0)
    proc = wal(repo, "exec", "--irreversible", "--", "true")
    assert proc.returncode == 3  # logged, waits for approval: an intent stays open
    proc = wal(repo, "claim", "README")
    assert proc.returncode == 1 and "error: run a: intent LSN 2" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_claim_records_are_validated_on_read() -> None:
    good = Claim("a", 2, ("src/*",), T0, 60)  # type: ignore[arg-type]
    assert decode(encode(good), "t") == good
    raw = json.loads(encode(good))
    for field, value in (("paths", []), ("paths", ["../x"]), ("paths", ["a", "a"]),
                         ("ttl", -1), ("at", "now"), ("ttl", True)):
        bad = dict(raw, **{field: value})
        with pytest.raises(CorruptLog):
            decode(json.dumps(bad).encode(), "t")


def test_cli_claim_runs_log_verify_and_warn_mode(repo: Path) -> None:
    out = json.loads(ok(repo, "begin", "--run", "a", "--task", "docs", "--claim", "README",
                        "--json"))
    assert out["claims"] == ["README"] and out["overlaps"] == []
    ok(repo, "begin", "--run", "b")
    doc = json.loads(ok(repo, "claim", "--run", "b", "--ttl", "30", "R*", "--json"))
    assert doc["ttl"] == 30 and doc["until"] == doc["at"] + 30
    assert [o["run"] for o in doc["overlaps"]] == ["a"]
    refused = wal(repo, "apply", "--run", "b", "write-file", "README", input=b"B\n")
    assert refused.returncode == 1
    assert "error: README is claimed by run a" in refused.stderr
    assert "hint: coordinate with run a" in refused.stderr
    assert (repo / "README").read_text() == "hello\n"
    runs = {r["run"]: r for r in json.loads(ok(repo, "runs", "--json"))}
    assert [c["path"] for c in runs["a"]["claims"]] == ["README"]
    assert "claims README" in ok(repo, "runs")
    log = [json.loads(line) for line in ok(repo, "log", "--run", "a", "--json").splitlines()]
    assert log[1]["type"] == "claim" and log[1]["paths"] == ["README"]
    assert "claims README" in ok(repo, "log", "--run", "a", "--no-pager")
    assert "all ok" in ok(repo, "verify", "--run", "a")
    git(repo, "config", "wal.claims", "warn")
    warned = wal(repo, "apply", "--run", "b", "write-file", "README", input=b"B\n")
    assert warned.returncode == 0 and "warning: README is claimed by run a" in warned.stderr
    assert (repo / "README").read_text() == "B\n"
    released = json.loads(ok(repo, "release", "--run", "a", "--json"))
    assert released["paths"] == ["README"]
    assert json.loads(ok(repo, "release", "--run", "a", "--json")) == {
        "run": "a", "lsn": None, "paths": []}


def test_verify_reports_a_claim_that_follows_an_open_intent(repo: Path) -> None:
    a = Wal(repo).begin(run_id="a")
    assert wal(repo, "exec", "--irreversible", "--", "true").returncode == 3
    head = a.store.head()
    # Written behind gitwal's back: claiming.claim refuses it (test above).
    with a.store.locked():
        a.store.append([Claim(a.id, 3, ("README",), T0, 60)], [], head)  # type: ignore[arg-type]
    proc = wal(repo, "verify", "--run", "a")
    assert proc.returncode == 1
    assert "claim written while intent LSN 2 is open" in proc.stdout + proc.stderr


def test_claim_documents_follow_the_schema_and_begin_reports_overlaps(repo: Path) -> None:
    ok(repo, "begin", "--run", "a", "--claim", "src/*")
    begun = check(json.loads(ok(repo, "begin", "--run", "b", "--claim", "src/x.py",
                                "--json")), "begin")
    assert [(o["run"], o["path"]) for o in begun["overlaps"]] == [("a", "src/*")]
    proc = wal(repo, "begin", "--run", "c", "--claim", "src/y.py")
    assert "warning: src/y.py overlaps run a's claim of 'src/*'" in proc.stderr
    check(json.loads(ok(repo, "claim", "--run", "a", "README", "--json")), "claim")
    check(json.loads(ok(repo, "runs", "--json")), "runs")
    for line in ok(repo, "log", "--run", "a", "--json").splitlines():
        check(json.loads(line), "log_line")
    check(json.loads(ok(repo, "release", "--run", "a", "README", "--json")), "release")
    check(json.loads(ok(repo, "release", "--run", "a", "README", "--json")), "release")
    bad = wal(repo, "claim", "--run", "a", "../x")
    assert bad.returncode == 1 and "error: cannot claim '../x'" in bad.stderr


def test_an_agent_call_on_a_claimed_path_is_blocked(repo: Path) -> None:
    ok(repo, "begin", "--run", "a", "--task", "docs", "--claim", "README")
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "t1"))
    assert r.code == 2
    assert "README is claimed by run a" in r.err and "nothing was changed" in r.err
    assert not [x for x in wal_log(repo, claude_run()) if x["type"] == "intent"]
    ok(repo, "release", "--run", "a")
    r = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "t2"))
    assert r.code == 0, r.err


def test_the_claims_cache_follows_the_log(repo: Path) -> None:
    """The cached fold (together/claimfold.py) is used only for the head it names:
    appends after it are folded in, a rewritten chain is folded whole, and a
    torn cache file is rebuilt from the log."""
    from gitwal.together import claimfold

    w = Wal(repo)
    a, b = w.begin(run_id="a"), w.begin(run_id="b")
    claiming.claim(a, ["src/*"], 60, now=T0)
    gitrepo = open_repository(repo)
    cache = claimfold._cache(gitrepo, "a")

    def held() -> list[str]:
        claimfold._HELD.clear()  # as a new process would: from the file, then the log
        return [c.pattern for c in claims.run_claims(gitrepo, "a", T0 + 1)]

    assert held() == ["src/*"] and cache.exists()
    claiming.claim(a, ["docs/*"], 60, now=T0)  # an append after the cached head
    a.write_file("x.txt", b"x\n")
    assert held() == ["docs/*", "src/*"]
    assert json.loads(cache.read_text())["head"] == a.store.head()
    claiming.release(a, ["src/*"], now=T0)
    assert held() == ["docs/*"]
    cache.write_text('{"head": "torn')  # a crash mid-rename cannot do this; a person can
    assert held() == ["docs/*"]
    cache.write_text(json.dumps({"head": "0" * 40, "held": [["lies/*", 2, T0 + 99]]}))
    assert held() == ["docs/*"]  # a head the chain never passes through: folded whole
    with (pytest.raises(PathBusy, match="claimed by run a"),
          claims.kept_off_others(gitrepo, Holder(b.id, 2, "write_file", ""), ["docs/x.md"])):
        pass


def test_a_ttl_past_a_year_is_refused_and_a_logged_one_breaks_nothing(repo: Path) -> None:
    """`--ttl 99999999999999999999` was accepted, and then `git wal runs` died
    with a traceback for the whole repository (its end is shown as a date)."""
    ok(repo, "begin", "--run", "r")
    proc = wal(repo, "claim", "README", "--ttl", "99999999999999999999")
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    with pytest.raises(ToolRefused, match="a year"):
        claiming.claim(Wal(str(repo)).run("r"), ["README"], ttl=10**20)
    assert [r["type"] for r in _records(repo, "r")] == ["plan"]

    # A log is data: a claim written with plumbing (or fetched) may carry any number.
    from .test_log_trust import append_raw, canonical
    huge = {"v": 1, "type": "claim", "run": "r", "lsn": 2, "paths": ["README"],
            "at": 1_700_000_000, "ttl": 10**20}
    with pytest.raises(CorruptLog, match="at and ttl"):
        decode(canonical(huge), "claim")
    ok(repo, "begin", "--run", "s")
    append_raw(repo, "r", 2, canonical(huge))
    runs = wal(repo, "runs")
    assert runs.returncode == 0 and "Traceback" not in runs.stderr, runs.stderr
    assert "DAMAGED" in runs.stdout and "s" in runs.stdout
    ok(repo, "apply", "--run", "s", "ensure-line", "README", "s")  # r's claim binds nothing


def _records(repo: Path, run: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in ok(repo, "log", "--run", run, "--json").splitlines()]
