"""`git wal verify`: a clean repository passes (after gc, in a bare mirror), and every
tampering in the corpus below is caught with a message that names what was done.

Two runs are built once through the real CLI and copied per test: run A uses every
tool, exec, an aborted step, checkpoints on the branch and detached, and two
compactions; run B starts on A's last checkpoint, checkpoints with an unlogged
path disclosed, and has one committed step the branch does not hold yet. The
tampering uses git plumbing only, and keeps each chain well-formed (gitwal's
author, dates and obj-<oid> entries), so only the content gives it away.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, init_repo, ok, sealed, wal

A, B = "run-a", "run-b"
# One test process builds the module's `template` for all (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("verify")

FILES = {
    "a.ts": "export function getUserById(id: string) {\n  return id;\n}\n",
    "b.js": "const x = $el + _tmp;\n",
    "notes.txt": "alpha\nbeta\ngamma\n",
    "old.txt": "to be moved\n",
    "gone.txt": "to be deleted\n",
    "src/util.ts": "export const getUserById = 1;\n",
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The two runs, built once (the autouse `hermetic` fixture is per test, so the
    same sealed environment is entered here too)."""
    home = tmp_path_factory.mktemp("verify-home")
    with sealed(home, tmp_path_factory.mktemp("verify-run")):
        repo = init_repo(tmp_path_factory.mktemp("verify") / "repo", FILES)
        ok(repo, "begin", "--run", A, "--task", "every tool", "--step", "edit", "--step", "gen")
        ok(repo, "apply", "write-file", "new/a.txt", input=b"fresh\n")
        ok(repo, "apply", "--step", "1", "replace-symbol", "a.ts", "getUserById", "fetchUser")
        ok(repo, "apply", "replace-text", "notes.txt", "--old", "gamma", "--new", "delta")
        ok(repo, "apply", "ensure-line", "notes.txt", "omega")
        ok(repo, "apply", "delete-file", "gone.txt")
        ok(repo, "apply", "move-file", "old.txt", "moved/old.txt")
        ok(repo, "exec", "--step", "2", "--", "sh", "-c", "mkdir gen && echo made > gen/o.txt")
        assert wal(repo, "apply", "--check", "false", "ensure-line", "notes.txt",
                   "never").returncode == 1
        ok(repo, "checkpoint")
        ok(repo, "compact")
        ok(repo, "exec", "--idempotent", "--", "sh", "-c", "rm b.js && echo c > c.txt")
        ok(repo, "checkpoint", "--detached")
        ok(repo, "compact")
        ok(repo, "apply", "ensure-line", "notes.txt", "final")
        ok(repo, "checkpoint")

        ok(repo, "begin", "--run", B, "--task", "second run")
        ok(repo, "apply", "write-file", "b1.txt", input=b"one\n")  # LSN 2, 3
        ok(repo, "apply", "replace-symbol", "src/util.ts", "getUserById", "fetchUser")  # 4, 5
        ok(repo, "apply", "replace-text", "notes.txt", "--old", "delta", "--new", "DELTA")  # 6, 7
        ok(repo, "apply", "ensure-line", "b1.txt", "two")  # 8, 9
        (repo / "disclosed.txt").write_text("not from a step\n")
        ok(repo, "checkpoint", "--include-unlogged")  # 10
        ok(repo, "apply", "ensure-line", "b1.txt", "three")  # 11, 12: not on the branch
        yield repo


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "repo", symlinks=True))


def verify_json(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    proc = wal(repo, "verify", "--format", "json", *args)
    assert proc.stderr == "", proc.stderr  # no progress when stderr is not a terminal
    return proc.returncode, json.loads(proc.stdout)


def failures(report: dict[str, Any], run: str) -> list[tuple[str, int | None, str]]:
    (result,) = [r for r in report["runs"] if r["run"] == run]
    return [(f["check"], f["lsn"], f["reason"]) for f in result["failures"]]


# -- the clean repository ----------------------------------------------------


@pytest.mark.slow
def test_clean_runs_pass_in_every_format_after_gc_and_in_a_mirror(
        repo: Path, tmp_path: Path) -> None:
    rows = [json.loads(x) for x in ok(repo, "log", "--all", "--json", "--run", A).splitlines()]
    assert {r["tool"] for r in rows if r["type"] == "intent"} == {
        "write_file", "replace_symbol", "replace_text", "ensure_line", "delete_file",
        "move_file", "exec"}
    assert len(git(repo, "for-each-ref", f"refs/wal-archive/{A}").splitlines()) == 2

    text = wal(repo, "verify", "--all")
    assert text.returncode == 0 and text.stderr == "", text.stdout + text.stderr
    assert text.stdout.splitlines() == [
        f"ok   {A}: {len(rows)} records verified, branch refs/heads/main",
        f"ok   {B}: 12 records verified, branch refs/heads/main",
        "verified 2 run(s): all ok",
    ]
    code, report = verify_json(repo, "--all")
    assert code == 0 and report["ok"] is True
    assert [(r["run"], r["ok"], r["records"], r["failures"]) for r in report["runs"]] == [
        (A, True, len(rows), []), (B, True, 12, [])]
    suite = ET.fromstring(ok(repo, "verify", "--all", "--format", "junit"))
    assert suite.tag == "testsuite" and suite.get("name") == "gitwal-verify"
    assert [c.get("name") for c in suite.iter("testcase")] == [A, B]
    assert suite.find("testcase/failure") is None and suite.get("failures") == "0"
    assert verify_json(repo)[1]["runs"][0]["run"] == B  # default: the current run

    gc = subprocess.run(["git", "gc", "--prune=now", "--quiet"], cwd=repo,
                        capture_output=True, text=True)
    assert gc.returncode == 0, gc.stderr
    assert verify_json(repo, "--all") == (0, report)

    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirror))
    code, in_mirror = verify_json(mirror)  # no current run in a mirror: every run
    assert code == 0 and in_mirror == report


def test_progress_goes_to_stderr_only_on_a_terminal(repo: Path) -> None:
    from .test_progress import on_terminal

    proc, shown = on_terminal(repo, "verify", "--all")
    assert proc.returncode == 0 and proc.stdout == ok(repo, "verify", "--all")
    assert f"gitwal: verifying [1/2] {A}: reading the log".encode() in shown
    assert f"gitwal: verifying [2/2] {B}: branch check".encode() in shown
    assert shown.endswith(b"\r\x1b[K")  # erased: the terminal is left as it was


# -- the tamper corpus ------------------------------------------------------


@dataclass
class Append:
    """One append commit, as plumbing sees it."""

    entries: list[str]  # `git ls-tree` lines: "<mode> <type> <oid>\t<name>"
    message: str
    env: dict[str, str] = field(default_factory=dict)  # author/committer identity and dates


def read_chain(repo: Path, ref: str) -> list[Append]:
    out = []
    for oid in git(repo, "rev-list", "--reverse", ref).split():
        head, _, message = git(repo, "cat-file", "commit", oid).partition("\n\n")
        env = {}
        for role in ("author", "committer"):
            m = re.search(rf"^{role} (.*) <(.*)> (\d+ [+-]\d{{4}})$", head, re.M)
            assert m is not None
            key = f"GIT_{role.upper()}"
            env.update({f"{key}_NAME": m[1], f"{key}_EMAIL": m[2], f"{key}_DATE": m[3]})
        out.append(Append(git(repo, "ls-tree", oid).splitlines(), message, env))
    return out


def write_chain(repo: Path, ref: str, chain: list[Append]) -> None:
    parent: list[str] = []
    for a in chain:
        tree = git(repo, "mktree", input="".join(e + "\n" for e in a.entries).encode()).strip()
        proc = subprocess.run(["git", "commit-tree", tree, *parent, "-F", "-"], cwd=repo,
                              input=a.message.encode(), capture_output=True,
                              env={**os.environ, **a.env}, check=True)
        parent = ["-p", proc.stdout.decode().strip()]
    git(repo, "update-ref", ref, parent[1])


def where(chain: list[Append], lsn: int) -> int:
    return next(i for i, a in enumerate(chain) if any(e.endswith(f"\t{lsn:012d}.json")
                                                      for e in a.entries))


def get_record(repo: Path, chain: list[Append], lsn: int) -> dict[str, Any]:
    line = next(e for e in chain[where(chain, lsn)].entries if e.endswith(f"{lsn:012d}.json"))
    data: dict[str, Any] = json.loads(git(repo, "cat-file", "blob", line.split()[2]))
    return data


def put_blob(repo: Path, data: bytes) -> str:
    return git(repo, "hash-object", "-w", "--stdin", input=data).strip()


def put_record(repo: Path, record: dict[str, Any]) -> str:
    """A record blob in gitwal's canonical encoding (docs/format.md)."""
    return put_blob(repo, json.dumps(record, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode())


def set_record(repo: Path, chain: list[Append], record: dict[str, Any]) -> None:
    name = f"{record['lsn']:012d}.json"
    a = chain[where(chain, record["lsn"])]
    a.entries = [e for e in a.entries if not e.endswith(name)]
    a.entries.append(f"100644 blob {put_record(repo, record)}\t{name}")


def new_append(repo: Path, chain: list[Append], record: dict[str, Any]) -> None:
    name = f"{record['lsn']:012d}.json"
    chain.append(Append([f"100644 blob {put_record(repo, record)}\t{name}"],
                        f"wal {record['lsn']} {record['type']}\n", dict(chain[-1].env)))


def edit_commit_post(repo: Path, chain: list[Append]) -> None:
    """Claim that ensure_line LSN 8 left other bytes (the forged blob kept alive too)."""
    forged = put_blob(repo, b"one\nforged\n")
    rec = get_record(repo, chain, 9)
    rec["post"] = [forged]
    set_record(repo, chain, rec)
    chain[where(chain, 9)].entries.append(f"100644 blob {forged}\tobj-{forged}")


def edit_intent_args(repo: Path, chain: list[Append]) -> None:
    rec = get_record(repo, chain, 4)
    rec["args"]["new"] = "fetchUserX"
    set_record(repo, chain, rec)


def swap_appends(repo: Path, chain: list[Append]) -> None:
    i = where(chain, 8)
    chain[i], chain[i + 1] = chain[i + 1], chain[i]


def drop_record(repo: Path, chain: list[Append]) -> None:
    del chain[where(chain, 7)]


def duplicate_commit(repo: Path, chain: list[Append]) -> None:
    new_append(repo, chain, {**get_record(repo, chain, 5), "lsn": 13})


def commit_unknown_intent(repo: Path, chain: list[Append]) -> None:
    new_append(repo, chain, {**get_record(repo, chain, 5), "lsn": 13, "intent": 99})


def checkpoint_tree(repo: Path, chain: list[Append]) -> None:
    """The checkpoint names a tree where b1.txt holds bytes no step wrote."""
    rec = get_record(repo, chain, 10)
    forged = put_blob(repo, b"one\ntwo\nforged\n")
    lines = [re.sub(r" [0-9a-f]{40}\tb1\.txt$", f" {forged}\tb1.txt", e)
             for e in git(repo, "ls-tree", rec["tree"]).splitlines()]
    tree = git(repo, "mktree", input="".join(x + "\n" for x in lines).encode()).strip()
    a = chain[where(chain, 10)]
    a.entries = [e for e in a.entries if not e.endswith(f"obj-{rec['tree']}")]
    a.entries.append(f"040000 tree {tree}\tobj-{tree}")
    rec["tree"] = tree
    set_record(repo, chain, rec)


Tamper = Callable[[Path, list[Append]], None]
CORPUS: list[tuple[Tamper, list[tuple[str, int | None, str]]]] = [
    (edit_commit_post, [
        ("intent", 9, r"commit LSN 9 records b1\.txt = \w{12}, but intent LSN 8 expects \w{12}"),
        ("checkpoint", 10, r"its tree holds b1\.txt = \w{12}, but the committed steps since "
                           r"the base commit leave it \w{12}"),
        ("unlogged", None, r"b1\.txt changed on main outside the log: it is \w{12} there, a "
                           r"state no committed step left it in .*; introduced by \w{12} "
                           r'"wal checkpoint: second run"'),
    ]),
    (edit_intent_args, [
        ("intent", 4, r"intent LSN 4 \(replace_symbol src/util\.ts\): replaying "
                      r"replace_symbol on the recorded pre-image gives src/util\.ts = \w{12}, "
                      r"the intent records \w{12}"),
    ]),
    (swap_appends, [
        ("chain", 8, r"appends out of order: LSN 9 \(append \w{12}\) comes before LSN 8, "
                     r"right after LSN 7"),
        ("objects", 9, r"LSN 9 names post-image of b1\.txt \w{12}, but no obj-\w{12} entry"),
    ]),
    (drop_record, [
        ("chain", 7, r"LSN 7 missing: LSN 8 follows LSN 6 in the chain \(a record was dropped\)"),
        ("closing", 8, r"intent LSN 8 begins while intent LSN 6 is still open"),
        # ... and what the lost commit of replace_text LSN 6 no longer explains:
        ("checkpoint", 10, r"counts 4 committed intents, the log has 3"),
        ("checkpoint", 10, r"its tree changes notes\.txt \(\w{12} -> \w{12}\) since the base "
                           r"commit, but no committed step did"),
        ("unlogged", None, r"notes\.txt changed on main outside the log: no committed step "
                           r"changed it"),
    ]),
    (duplicate_commit, [
        ("closing", 13, r"commit closes intent LSN 4, already closed by LSN 5"),
    ]),
    (commit_unknown_intent, [
        ("closing", 13, r"commit closes LSN 99, which is not an earlier record"),
    ]),
    (checkpoint_tree, [
        ("checkpoint", 10, r"commit \w{12} does not have the recorded tree \w{12}"),
        ("checkpoint", 10, r"its tree holds b1\.txt = \w{12}, but the committed steps since "
                           r"the base commit leave it \w{12}"),
    ]),
]


@pytest.mark.parametrize(("tamper", "expected"), CORPUS, ids=[t.__name__ for t, _ in CORPUS])
def test_tampered_log_is_caught(repo: Path, tamper: Tamper,
                                expected: list[tuple[str, int | None, str]]) -> None:
    chain = read_chain(repo, f"refs/wal/{B}")
    tamper(repo, chain)
    write_chain(repo, f"refs/wal/{B}", chain)
    code, report = verify_json(repo, "--run", B)
    assert code == 1 and report["ok"] is False
    found = failures(report, B)
    # Exactly the expected failures (in order), each with its LSN and a precise reason.
    assert [(c, n) for c, n, _ in found] == [(c, n) for c, n, _ in expected], found
    for (_, _, reason), (_, _, pattern) in zip(found, expected, strict=True):
        assert re.search(pattern, reason), reason


def test_archived_segment_that_does_not_join_is_caught(repo: Path) -> None:
    """Rewrite, in the first archive, the checkpoint record the second one starts at."""
    ref = f"refs/wal-archive/{A}/1"
    chain = read_chain(repo, ref)
    records = ok(repo, "log", "--json", "--all", "--run", A).splitlines()
    second = read_chain(repo, f"refs/wal-archive/{A}/2")[0]
    lsn = int(next(e for e in second.entries if e.endswith(".json")).split("\t")[1][:12])
    rec = get_record(repo, chain, lsn)
    rec["committed"] += 1
    set_record(repo, chain, rec)
    write_chain(repo, ref, chain)
    text = wal(repo, "verify", "--all")
    assert text.returncode == 1 and text.stderr == ""
    assert text.stdout.splitlines() == [
        f"{A} LSN {lsn}: chain: LSN {lsn} differs between refs/wal-archive/{A}/1 and "
        f"refs/wal-archive/{A}/2 (the segments do not join)",
        f"FAIL {A}: 1 failure(s) in {len(records)} records, branch refs/heads/main",
        f"ok   {B}: 12 records verified, branch refs/heads/main",
        "verified 2 run(s): 1 failed",
    ]


def test_branch_change_outside_the_log_names_its_commit(repo: Path) -> None:
    (repo / "stray.txt").write_text("nobody logged me\n")
    git(repo, "add", "stray.txt")
    git(repo, "commit", "-q", "-m", "manual change")
    sha = git(repo, "rev-parse", "HEAD").strip()
    code, report = verify_json(repo, "--all")
    assert code == 1
    # Both runs' base..tip contain the commit; each names it, and nothing else is wrong.
    # Run A began earlier: run B's log explains the rest of A's base..tip, and is named.
    for run, logs in ((A, f" of {A} or {B}"), (B, "")):
        assert failures(report, run) == [(
            "unlogged", None, f"stray.txt changed on main outside the log: no committed step"
            f'{logs} changed it; introduced by {sha[:12]} "manual change"')]

    suite = ET.fromstring(ok_or_fail(repo, "verify", "--all", "--format", "junit"))
    cases = list(suite.iter("testcase"))
    assert [c.get("name") for c in cases] == [A, B] and suite.get("failures") == "2"
    for case in cases:
        failure = case.find("failure")
        assert failure is not None and "stray.txt" in (failure.get("message") or "")
        assert sha[:12] in (failure.text or "")

    # The same change, checked against a branch that does not have it, passes.
    git(repo, "branch", "before", "HEAD~1")
    assert verify_json(repo, "--all", "--branch", "before")[0] == 0


def ok_or_fail(repo: Path, *args: str) -> str:
    proc = wal(repo, *args)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    return proc.stdout


def test_step_built_on_an_edit_outside_the_log_is_noted(repo: Path) -> None:
    """The step "explains" the edit it built on, so it fails nothing; a note says so."""
    with (repo / "b1.txt").open("a") as f:
        f.write("edited by hand\n")
    ok(repo, "apply", "ensure-line", "b1.txt", "four")  # LSN 13, 14
    code, report = verify_json(repo, "--run", B)
    (result,) = report["runs"]
    assert code == 0 and result["failures"] == []
    assert len(result["notes"]) == 1 and re.fullmatch(
        r"LSN 13 \(ensure_line\) began with b1\.txt = \w{12}, not \w{12} as LSN 11 left it: "
        r"changed outside the log in between, and the step built on it", result["notes"][0])


def test_bad_requests_are_errors_with_hints(repo: Path) -> None:
    unknown = wal(repo, "verify", "--run", "no-such-run")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.startswith("error: no run no-such-run\nhint: ")
    branch = wal(repo, "verify", "--branch", "no-such-branch")
    assert branch.returncode == 1 and "error: no branch" in branch.stderr
    both = wal(repo, "verify", "--run", A, "--all")
    assert both.returncode == 2 and "error: --run and --all exclude each other" in both.stderr
