"""A log is data, not a program: forged, fetched and hostile logs.

Each forged record is written with git plumbing (docs/format.md), or by a
second clone through gitwal itself; then the real CLI reads it. Nothing read
from a log may write outside the tree or under .git, plant a symlink or an
executable, or run a command the local user did not write; every refusal is
`error:` / `hint:` (or exit 3, in doubt), never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitwal.base.ids import Lsn, RunId
from gitwal.log.store import Ref, Store
from gitwal.records.model import REPLAY_SAFE, Intent

from .conftest import git, init_repo, ok, tree_of, wal
from .test_agent_payloads import claude, claude_run, claude_tool, run_hook

RUN = "forged-run"
PRECIOUS = "precious, not gitwal's\n"
EVIL = b"#!/bin/sh\ntouch PWNED\n"


def blob(repo: Path, data: bytes) -> str:
    return git(repo, "hash-object", "-w", "--stdin", input=data).strip()


def canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def append_raw(repo: Path, run: str, lsn: int, data: bytes, objects: tuple[str, ...] = ()
               ) -> None:
    """One append commit holding ``data`` as record ``lsn`` (plumbing only)."""
    ref = f"refs/wal/{run}"
    head = git(repo, "rev-parse", ref).strip()
    rec = blob(repo, data)
    entries = f"100644 blob {rec}\t{lsn:012d}.json\n"
    entries += "".join(f"100644 blob {o}\tobj-{o}\n" for o in sorted(set(objects)))
    tree = git(repo, "mktree", input=entries.encode()).strip()
    commit = git(repo, "commit-tree", tree, "-p", head, "-m", f"wal {lsn} forged").strip()
    git(repo, "update-ref", ref, commit, head)


def intent(lsn: int, tool: str, args: dict[str, Any], target: list[str], pre: list[str],
           post: list[str] | None, mode: list[int], check: str | None = None,
           replay: str = REPLAY_SAFE, run: str = RUN) -> dict[str, Any]:
    return {"v": 1, "type": "intent", "run": run, "lsn": lsn, "tool": tool, "args": args,
            "target": target, "pre": pre, "post": post, "mode": mode, "replay": replay,
            "key": f"{run}:{lsn}", "check": check, "step": None}


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A repository with a run of one committed step, and a marker outside the tree."""
    repo = init_repo(tmp_path / "repo")
    (tmp_path / "marker.txt").write_text(PRECIOUS)
    ok(repo, "begin", "--run", RUN, "--task", "t")
    ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=b"one\n")
    return repo


def forged_cases(repo: Path) -> dict[str, dict[str, Any]]:
    """Intents (LSN 4) that steer recovery out of bounds; every one is torn (the
    target matches neither pre nor post), so recovery on main restored its pre."""
    marker = repo.parent / "marker.txt"
    evil, other = blob(repo, EVIL), blob(repo, b"other\n")
    return {
        "dotdot": intent(4, "write_file", {"path": "../marker.txt", "content": other},
                         ["../marker.txt"], [evil], [other], [0o100644]),
        "absolute": intent(4, "write_file", {"path": str(marker), "content": other},
                           [str(marker)], [evil], [other], [0o100644]),
        "git-hook": intent(4, "write_file", {"path": ".git/hooks/pre-commit",
                                             "content": other},
                           [".git/hooks/pre-commit"], [evil], [other], [0o100755]),
        "git-case": intent(4, "write_file", {"path": ".GIT/hooks/post-checkout",
                                             "content": other},
                           [".GIT/hooks/post-checkout"], [evil], [other], [0o100755]),
        "dot": intent(4, "write_file", {"path": "./x", "content": other},
                      ["./x"], [evil], [other], [0o100644]),
        "backslash": intent(4, "write_file", {"path": "..\\marker.txt", "content": other},
                            ["..\\marker.txt"], [evil], [other], [0o100644]),
        "unknown-tool": intent(4, "frobnicate", {"path": "b.txt"}, ["b.txt"], [evil],
                               [other], [0o100755]),
        "symlink": intent(4, "write_file", {"path": "link", "content": other}, ["link"],
                          [blob(repo, str(marker).encode())], [other], [0o120000]),
        "mode-of-absent": intent(4, "write_file", {"path": "new.sh", "content": other},
                                 ["new.sh"], ["absent"], [other], [0o100755]),
        "target-not-args": intent(4, "write_file", {"path": "a.txt", "content": other},
                                  ["../marker.txt"], [evil], [other], [0o100644]),
        "exec-target": intent(4, "exec", {"argv": ["true"]}, ["../marker.txt"],
                              [tree_of(repo)], None, [0o040000]),
        "abort-restored": {"v": 1, "type": "abort", "run": RUN, "lsn": 4, "intent": 2,
                           "reason": "x", "restored": ["../marker.txt"], "output": ""},
        "unlogged-paths": {"v": 1, "type": "unlogged", "run": RUN, "lsn": 4,
                           "paths": ["/etc/passwd"], "expected": ["absent"],
                           "observed": ["absent"], "noticed": "x"},
    }


CASES = ["dotdot", "absolute", "git-hook", "git-case", "dot", "backslash", "unknown-tool",
         "symlink", "mode-of-absent", "target-not-args", "exec-target", "abort-restored",
         "unlogged-paths"]


def untouched(repo: Path) -> None:
    """The marker outside the tree is intact; no hook, no symlink, no PWNED."""
    assert (repo.parent / "marker.txt").read_text() == PRECIOUS
    hooks = repo / ".git" / "hooks"
    assert not (hooks / "pre-commit").exists() and not (hooks / "post-checkout").exists()
    assert not (repo / "link").is_symlink() and not (repo / "link").exists()
    assert not (repo / "new.sh").exists() and not (repo / "PWNED").exists()
    assert not (repo.parent / "PWNED").exists()


def refused(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "\nhint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in proc.stderr, proc.stderr


def verify_fails(repo: Path, lsn: int, why: str) -> None:
    proc = wal(repo, "verify", "--run", RUN, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    failures = json.loads(proc.stdout)["runs"][0]["failures"]
    assert any(f.get("lsn") == lsn and why in f["reason"] for f in failures), failures


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_forged_record_is_refused_by_every_reader(victim: Path, case: str) -> None:
    record = forged_cases(victim)[case]
    append_raw(victim, RUN, 4, canonical(record),
               tuple(x for x in (record.get("pre") or []) + (record.get("post") or [])
                     if x != "absent" and len(x) == 40 and record["tool"] != "exec"))
    why = {"dotdot": "'..' component", "absolute": "is absolute", "git-hook": "goes through .git",
           "git-case": "goes through .git", "dot": "'.' or '..' component",
           "backslash": "contains a backslash", "unknown-tool": "unknown tool 'frobnicate'",
           "symlink": "mode 120000", "mode-of-absent": "mode 100755 with pre 'absent'",
           "target-not-args": "'..' component",
           "exec-target": "exec intent's target must be ['.']",
           "abort-restored": "restored: path '../marker.txt'",
           "unlogged-paths": "paths: path '/etc/passwd' is absolute"}[case]
    for args in (["recover", "--run", RUN], ["recover", "--run", RUN, "--redo"],
                 ["recover", "--run", RUN, "--restore"], ["prompt", "--run", RUN],
                 ["status", "--run", RUN], ["log", "--run", RUN, "--json"]):
        refused(wal(victim, *args), f"refs/wal/{RUN} LSN 4", why)
    untouched(victim)
    verify_fails(victim, 4, why)


def test_a_forged_check_is_not_run_and_the_step_stays_in_doubt(victim: Path) -> None:
    """The paths are fine, the post equals the file: on main recovery ran the check."""
    pwned = victim.parent / "PWNED"
    now = blob(victim, b"one\n")
    record = intent(4, "write_file", {"path": "a.txt", "content": now}, ["a.txt"],
                    ["absent"], [now], [0], check=f"touch {pwned}")
    append_raw(victim, RUN, 4, canonical(record), (now,))
    for args in (["recover", "--run", RUN], ["recover", "--run", RUN, "--redo"]):
        proc = wal(victim, *args, "--json")
        assert proc.returncode == 3, proc.stderr
        assert "Traceback" not in proc.stderr
        (step,) = json.loads(proc.stdout)["intents"]
        assert step["lsn"] == 4 and step["open"] is True and step["action"] == "left-open"
        assert f"its check 'touch {pwned}' was not written in this clone" in step["detail"]
        assert "it was not run" in step["detail"]
    assert not pwned.exists()
    assert (victim / "a.txt").read_text() == "one\n"
    log = json.loads(ok(victim, "log", "--run", RUN, "--json").splitlines()[-1])
    assert log["lsn"] == 4 and log["status"] == "open"  # nothing was appended
    prompt = ok(victim, "prompt", "--run", RUN)
    assert "LSN 4" in prompt
    untouched(victim)


def test_a_forged_idempotent_exec_is_not_redone(victim: Path) -> None:
    pwned = victim.parent / "PWNED"
    record = intent(4, "exec", {"argv": ["touch", str(pwned)]}, ["."], [tree_of(victim)],
                    None, [0o040000])
    append_raw(victim, RUN, 4, canonical(record))
    proc = wal(victim, "recover", "--run", RUN, "--redo", "--json")
    assert proc.returncode == 3, proc.stderr
    (step,) = json.loads(proc.stdout)["intents"]
    assert step["open"] is True
    assert f"its command 'touch {pwned}' was not written in this clone" in step["detail"]
    assert not pwned.exists()
    untouched(victim)


def test_an_intent_whose_auth_was_edited_is_foreign(victim: Path) -> None:
    """The MAC covers every byte of the intent: change the check, keep the auth."""
    ok(victim, "apply", "--check", "true", "write-file", "b.txt", "--from", "-",
       input=b"two\n")
    mine = json.loads(ok(victim, "log", "--run", RUN, "--json").splitlines()[3])
    assert mine["lsn"] == 4 and len(mine["auth"]) == 64
    pwned = victim.parent / "PWNED"
    now = blob(victim, b"two\n")
    record = intent(6, "write_file", {"path": "b.txt", "content": now}, ["b.txt"], [now],
                    [now], [0o100644], check=f"touch {pwned}")
    record["auth"] = mine["auth"]
    append_raw(victim, RUN, 6, canonical(record), (now,))
    proc = wal(victim, "recover", "--run", RUN)
    assert proc.returncode == 3, proc.stderr
    assert not pwned.exists()


def test_own_checks_still_run_in_recovery(victim: Path) -> None:
    """A step this clone logged keeps working: its check runs in recovery."""
    ran = victim.parent / "ran"
    proc = wal(victim, "apply", "--check", f"touch {ran}", "write-file", "c.txt",
               "--from", "-", input=b"c\n", env={"GITWAL_CRASH_AT": "after-apply"})
    assert proc.returncode == -9
    assert not ran.exists()
    secret = victim / ".git" / "wal" / "secret"
    assert secret.stat().st_mode & 0o777 == 0o600 and len(secret.read_bytes()) == 32
    assert "secret" not in git(victim, "for-each-ref")  # never in a ref
    out = json.loads(ok(victim, "recover", "--run", RUN, "--json"))
    assert out["intents"][0]["action"] == "committed"
    assert ran.exists()


def test_the_agent_hooks_refuse_a_forged_record(repo: Path) -> None:
    """Claude Code's SessionStart runs recovery: a forged record stops it, and the
    next tool call is refused, with nothing written."""
    (repo.parent / "marker.txt").write_text(PRECIOUS)
    run = claude_run()
    assert run_hook(repo, "claude", claude(repo, "SessionStart", source="startup")).code == 0
    evil, other = blob(repo, EVIL), blob(repo, b"other\n")
    record = intent(2, "write_file", {"path": "../marker.txt", "content": other},
                    ["../marker.txt"], [evil], [other], [0o100644], run=run)
    append_raw(repo, run, 2, canonical(record), (evil, other))
    start = run_hook(repo, "claude", claude(repo, "SessionStart", source="resume"))
    assert start.code == 0 and "Traceback" not in start.err
    assert f"refs/wal/{run} LSN 2" in start.json()["systemMessage"]
    assert "corrupt record" in start.json()["systemMessage"]
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    pre = run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit, "toolu_1"))
    assert pre.code == 2 and "corrupt record" in pre.err and "Traceback" not in pre.err
    untouched(repo)


# -- malformed logs: deep JSON, bad closings -------------------------------------


def deep_json(depth: int) -> bytes:
    return (b'{"v":1,"type":"intent","run":"' + RUN.encode() + b'","lsn":4,"args":'
            + b"[" * depth + b"]" * depth + b"}")


@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_json_is_a_corrupt_record(victim: Path, depth: int) -> None:
    append_raw(victim, RUN, 4, deep_json(depth))
    for args in (["log", "--run", RUN], ["log", "--run", RUN, "--json"],
                 ["status", "--run", RUN], ["recover", "--run", RUN],
                 ["prompt", "--run", RUN]):
        refused(wal(victim, *args), "LSN 4", "nested")
    verify_fails(victim, 4, "nested")


@pytest.mark.parametrize(("closes", "kind"), [(99, "commit"), (1, "commit"), (1, "abort"),
                                              (3, "abort"), (2, "abort")])
def test_a_closing_of_no_open_intent_is_refused(victim: Path, closes: int, kind: str) -> None:
    """LSN 2 is the intent (closed by 3), 1 the plan, 99 does not exist."""
    if kind == "commit":
        rec: dict[str, Any] = {"v": 1, "type": "commit", "run": RUN, "lsn": 4,
                               "intent": closes, "post": [blob(victim, b"one\n")],
                               "verified": "x", "recovered": False}
    else:
        rec = {"v": 1, "type": "abort", "run": RUN, "lsn": 4, "intent": closes,
               "reason": "x", "restored": [], "output": ""}
    append_raw(victim, RUN, 4, canonical(rec))
    why = f"the {kind} closes LSN {closes}, which is not an earlier open intent"
    for args in (["log", "--run", RUN], ["status", "--run", RUN],
                 ["recover", "--run", RUN], ["prompt", "--run", RUN]):
        refused(wal(victim, *args), f"LSN 4: {why}")
    proc = wal(victim, "verify", "--run", RUN, "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    failures = json.loads(proc.stdout)["runs"][0]["failures"]
    assert any(f.get("lsn") == 4 and "closes" in f["reason"] for f in failures), failures
    untouched(victim)


# -- end to end: a pushed run, a forged append, fetch, resume ----------------------


@pytest.mark.slow
def test_a_fetched_forged_intent_never_runs_on_resume(tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    seed = init_repo(tmp_path / "seed")
    git(seed, "push", "-q", str(server), "main")
    git(tmp_path, "clone", "-q", server.as_uri(), "a")
    git(tmp_path, "clone", "-q", server.as_uri(), "b")
    a, b = tmp_path / "a", tmp_path / "b"
    pwned = tmp_path / "PWNED"
    run = claude_run()

    # A works with Claude Code: its hooks log an edit; A pushes the run.
    assert run_hook(a, "claude", claude(a, "SessionStart", source="startup")).code == 0
    edit = {"file_path": str(a / "README"), "old_string": "hello", "new_string": "bye"}
    pre = run_hook(a, "claude", claude_tool(a, "PreToolUse", "Edit", edit, "toolu_1"))
    assert pre.code == 0, pre.err
    (a / "README").write_text("bye\n")
    post = run_hook(a, "claude", claude_tool(a, "PostToolUse", "Edit", edit, "toolu_1"))
    assert post.code == 0, post.err
    ok(a, "push", "--run", run)

    # B (its own clone, its own secret) fetches the run and appends an intent
    # whose post is A's README, with a check that would plant PWNED.
    ok(b, "fetch", "--run", run)
    repo_b = pygit2.Repository(str(b))
    store = Store(repo_b, RunId(run))
    head = store.head()
    assert head is not None
    last = store.records()[-1].lsn
    readme = blob(b, b"bye\n")
    forged = Intent(RunId(run), Lsn(last + 1), "write_file", {"path": "README",
                    "content": readme}, ("README",), (readme,), (readme,), (0o100644,),
                    REPLAY_SAFE, f"{run}:{last + 1}", check=f"touch {pwned}")
    store.append([forged], [Ref(readme)], head)
    assert (b / ".git" / "wal" / "secret").exists()  # B's MAC, made with B's secret
    ok(b, "push", "--run", run)

    # A fetches (a fast-forward of its own run) and Claude Code resumes.
    fetched = json.loads(ok(a, "fetch", "--json"))
    assert fetched["ok"] is True
    assert git(a, "rev-parse", f"refs/wal/{run}") == git(b, "rev-parse", f"refs/wal/{run}")
    start = run_hook(a, "claude", claude(a, "SessionStart", source="resume"))
    assert start.code == 0, start.err
    assert "Traceback" not in start.err
    text = start.json()["hookSpecificOutput"]["additionalContext"]
    assert f"LSN {last + 1} is in doubt" in text
    assert not pwned.exists()
    proc = wal(a, "recover", "--run", run, "--json")
    assert proc.returncode == 3, proc.stderr
    assert "was not written in this clone" in json.loads(proc.stdout)["intents"][0]["detail"]
    assert not pwned.exists()
    assert (a / "README").read_text() == "bye\n"
    assert not any(p.name == "PWNED" for p in tmp_path.rglob("PWNED"))
    assert os.listdir(a / ".git" / "hooks") == os.listdir(b / ".git" / "hooks")


def test_the_decoder_knows_exactly_the_tools_gitwal_has() -> None:
    """records/intent_args.py sits below tools.py, so it keeps its own list: keep them equal."""
    from gitwal.changes import tools
    from gitwal.records import intent_args

    assert set(intent_args.FILE_TOOLS) == set(tools.TOOLS)
    assert {n: t.path_args for n, t in tools.TOOLS.items()} == intent_args.PATH_ARGS
    assert tools.RESTORING_TOOLS == intent_args.RESTORING_TOOLS
    assert {*tools.TOOLS, *tools.RESTORING_TOOLS, "write_files", "exec"} == intent_args.KNOWN_TOOLS


@pytest.mark.parametrize("path", ["", "a\0b", "/abs", "a\\b", "a//b", "a/", "./a", "a/./b",
                                  "..", "a/../b", ".git", ".Git/config", "x/.GIT/y"])
def test_path_rules_refuse(path: str) -> None:
    from gitwal.records.paths import path_problem

    assert path_problem(path) != ""


@pytest.mark.parametrize("path", ["a", "a/b.c", "...", ".gitignore", "x/.github/w.yml",
                                  "ü/ñ", "a b"])
def test_path_rules_accept(path: str) -> None:
    from gitwal.records.paths import path_problem

    assert path_problem(path) == ""


def test_auth_is_encoded_only_when_present_and_validated() -> None:
    from gitwal.base.errors import CorruptLog
    from gitwal.records.codec import decode, encode

    base = intent(4, "write_file", {"path": "a", "content": "a" * 40}, ["a"], ["absent"],
                  ["a" * 40], [0], check="make test")
    plain = decode(canonical(base), "w")
    assert isinstance(plain, Intent) and plain.auth is None
    assert encode(plain) == canonical(base)  # no "auth" key: old logs keep their bytes
    signed = decode(canonical({**base, "auth": "0f" * 32}), "w")
    assert isinstance(signed, Intent) and signed.auth == "0f" * 32
    assert b'"auth":"' + b"0f" * 32 + b'"' in encode(signed)
    for bad in (None, "0F" * 32, "0f" * 31, 7):
        with pytest.raises(CorruptLog, match="auth must be 64 lowercase hex digits"):
            decode(canonical({**base, "auth": bad}), "w")
