"""Bad input, end to end through the real `git-wal` executable.

Every refusal must be a clean ``error: ...`` / ``hint: ...`` on stderr with the
documented exit code, never a traceback, and must leave both the log (the
refs/wal refs, hence every record) and the working tree exactly as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitwal import Wal

from .conftest import GIT_WAL, git, loose_object, ok, tree_of, wal

RUN = "r1"
REF = f"refs/wal/{RUN}"

# -- helpers -------------------------------------------------------------------


def assert_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """A clean failure: exit code, `error: ` first, a `hint: ` line, no traceback."""
    err = proc.stderr
    shown = f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {err}"
    assert proc.returncode == code, shown
    assert "Traceback" not in err and "Traceback" not in proc.stdout, shown
    assert err.startswith("error: "), shown
    hints = [line for line in err.splitlines() if line.startswith("hint: ")]
    assert hints and all(len(h) > len("hint: ") for h in hints), shown
    for needle in needles:
        assert needle.lower() in err.lower(), f"{needle!r} not in stderr\n{shown}"


def read_path(path: Path) -> bytes | str | None:
    """Bytes of a file, ``link -> target`` of a symlink, a listing of a dir, or None."""
    if path.is_symlink():
        return "link -> " + os.readlink(path)
    if path.is_dir():
        return "dir: " + " ".join(sorted(os.listdir(path)))
    if path.exists():
        return path.read_bytes()
    return None


@dataclass(frozen=True)
class State:
    refs: str  # every refs/wal ref and the object it names
    tree: str  # tree id of the whole working tree (tracked and untracked)
    paths: tuple[tuple[str, bytes | str | None], ...]
    log: str | None  # `git wal log --json` output, when asked for


def state(repo: Path, watch: Sequence[Path] = (), log: bool = False) -> State:
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname) %(objecttype)",
               "refs/wal/")
    watched = [*watch, repo / ".git" / "wal" / "current", repo / ".git" / "config"]
    return State(
        refs=refs,
        tree=tree_of(repo),
        paths=tuple((str(p), read_path(p)) for p in watched),
        log=ok(repo, "log", "--json", "--run", RUN) if log else None,
    )


def log_rows(repo: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(repo, "log", "--json").splitlines()]


def rev(repo: Path, what: str) -> str:
    return git(repo, "rev-parse", "--verify", what).strip()


def forge(repo: Path, parent: str, files: dict[str, bytes]) -> str:
    """A commit (git plumbing only) whose tree holds ``files``, on ``parent``."""
    entries = []
    for name, data in sorted(files.items()):
        blob = git(repo, "hash-object", "-w", "--stdin", input=data).strip()
        entries.append(f"100644 blob {blob}\t{name}\n")
    tree = git(repo, "mktree", input="".join(entries).encode()).strip()
    return git(repo, "commit-tree", tree, "-p", parent, "-m", "forged").strip()


def replace_lsn2(repo: Path, record: bytes) -> None:
    """Swap the commit carrying LSN 2 for one holding ``record`` as LSN 2."""
    head = rev(repo, REF)
    plan_commit = rev(repo, f"{REF}~2")
    assert "000000000001.json" in git(repo, "ls-tree", "--name-only", plan_commit)
    new = forge(repo, plan_commit, {"000000000002.json": record})
    git(repo, "update-ref", REF, new, head)


@pytest.fixture
def started(repo: Path) -> Path:
    """A run `r1` with one committed step (LSNs 1..3) and a few files to edit.

    Built through the library (in-process, so fast); the tests drive the CLI.
    """
    (repo / "src").mkdir()
    (repo / "src" / "app.js").write_text("getUserById(1);\n")
    (repo / "dup.txt").write_text("foo foo\n")
    (repo / "bin.dat").write_bytes(b"foo\0bar\n")
    Wal(repo).begin(task="bad input", run_id=RUN).apply(
        "ensure_line", path="notes.txt", line="first"
    )
    assert (repo / "notes.txt").read_bytes() == b"first\n"
    assert git(repo, "rev-list", "--count", REF).strip() == "3"  # one append per record
    return repo


# -- refused paths -------------------------------------------------------------

REFUSED = "refused path"
PATH_CASES: dict[str, tuple[str, str, str]] = {
    # case id: (path given to the tool, identifier replace-symbol would rename,
    #           what the error must say)
    "absolute": ("<ABS>", "foo", REFUSED),
    "dotdot": ("../outside.txt", "foo", REFUSED),
    "dotdot-nested": ("a/../../outside.txt", "foo", REFUSED),
    "git-config": (".git/config", "bare", REFUSED),
    "nested-git": ("sub/.git/x", "foo", REFUSED),
    "symlink-dir-outside": ("link/x", "foo", REFUSED),
    "symlink": ("lnk", "foo", REFUSED),
    "directory": ("sub", "foo", REFUSED),
    # A regular file used as a directory, directly or through a symlink: the
    # path can never be written, so it must be refused before anything is
    # logged (any clean refusal will do, e.g. "does not exist").
    "through-a-file": ("target.txt/x", "foo", ""),
    "through-symlink-to-file": ("lnk/x", "foo", ""),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(PATH_CASES))
def test_refused_paths(started: Path, tmp_path: Path, case: str) -> None:
    repo = started
    outside = tmp_path / "outside.txt"
    outside.write_text("foo\n")
    outdir = tmp_path / "outdir"
    outdir.mkdir()
    (outdir / "x").write_text("foo\n")
    (repo / "link").symlink_to(outdir, target_is_directory=True)
    (repo / "target.txt").write_text("foo\n")
    (repo / "lnk").symlink_to("target.txt")
    (repo / "sub").mkdir()
    (repo / "sub" / "f.txt").write_text("foo\n")
    path, symbol, needle = PATH_CASES[case]
    if path == "<ABS>":
        path = str(outside)
    assert (repo / ".git" / "config").read_text().count("bare") == 1

    watch = [tmp_path, outside, outdir, outdir / "x", repo / "lnk", repo / "target.txt",
             repo / "sub", repo / "sub" / ".git"]
    before = state(repo, watch)
    attempts: list[tuple[list[str], bytes | None]] = [
        (["apply", "write-file", path, "--from", "-"], b"pwned\n"),
        (["apply", "ensure-line", path, "pwned"], None),
        (["apply", "replace-symbol", path, symbol, "pwned"], None),
    ]
    for args, stdin in attempts:
        proc = wal(repo, *args, input=stdin)
        assert_error(proc, 1, needle)
        assert state(repo, watch) == before, args


# -- tool refusals -------------------------------------------------------------


@pytest.mark.parametrize(("old", "needle"), [("zzz", "0 times"), ("foo", "2 times")])
def test_replace_text_needs_exactly_one_match(started: Path, old: str, needle: str) -> None:
    before = state(started, [started / "dup.txt"], log=True)
    proc = wal(started, "apply", "replace-text", "dup.txt", "--old", old, "--new", "bar")
    assert_error(proc, 1, needle, "dup.txt")
    assert state(started, [started / "dup.txt"], log=True) == before
    assert (started / "dup.txt").read_bytes() == b"foo foo\n"


def test_replace_symbol_refuses_binary_file(started: Path) -> None:
    before = state(started, [started / "bin.dat"], log=True)
    proc = wal(started, "apply", "replace-symbol", "bin.dat", "foo", "bar")
    assert_error(proc, 1, "binary")
    assert state(started, [started / "bin.dat"], log=True) == before
    assert (started / "bin.dat").read_bytes() == b"foo\0bar\n"


# -- no repository, no commit, no run -----------------------------------------


@pytest.mark.parametrize("args", [
    ["status"], ["begin", "--task", "t"], ["apply", "ensure-line", "f.txt", "x"],
], ids=lambda a: a[0])
def test_not_a_git_repository(tmp_path: Path, args: list[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("keep\n")
    assert not any((p / ".git").exists() for p in [plain, *plain.parents]), "test needs no repo"
    proc = wal(plain, *args)
    assert_error(proc, 1, "not a git repository")
    assert sorted(os.listdir(plain)) == ["f.txt"]
    assert (plain / "f.txt").read_bytes() == b"keep\n"


def test_begin_with_unborn_head(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "main")
    (fresh / "f.txt").write_text("x\n")
    proc = wal(fresh, "begin", "--task", "t")
    assert_error(proc, 1, "unborn")
    assert git(fresh, "for-each-ref", "refs/wal/") == ""
    assert not (fresh / ".git" / "wal" / "current").exists()
    assert (fresh / "f.txt").read_bytes() == b"x\n"


@pytest.mark.parametrize("args", [
    ["apply", "ensure-line", "README", "x"], ["log"], ["recover"],
    ["exec", "--", "touch", "made-by-exec"],
], ids=lambda a: a[0])
def test_no_current_run(repo: Path, args: list[str]) -> None:
    before = state(repo, [repo / "README", repo / "made-by-exec"])
    proc = wal(repo, *args)
    assert_error(proc, 1, "no current run", "git wal begin")
    assert state(repo, [repo / "README", repo / "made-by-exec"]) == before
    assert git(repo, "for-each-ref", "refs/wal/") == ""


ANY_RUN_COMMAND = [
    ["apply", "ensure-line", "notes.txt", "x"], ["log"], ["status"], ["recover"], ["prompt"],
    ["exec", "--", "touch", "made-by-exec"],
]
UNKNOWN_RUNS = [
    *[("nope", "no run nope", args) for args in ANY_RUN_COMMAND],
    ("bad..id", "invalid run id", ANY_RUN_COMMAND[0]),
    ("-x", "invalid run id", ["log"]),
    ("a.lock", "invalid run id", ["recover"]),
    ("x/../../y", "invalid run id", ["status"]),
]


@pytest.mark.parametrize(("run_id", "needle", "args"), UNKNOWN_RUNS,
                         ids=[f"{r}-{a[0]}" for r, _, a in UNKNOWN_RUNS])
def test_unknown_run(started: Path, run_id: str, needle: str, args: list[str]) -> None:
    watch = [started / "notes.txt", started / "made-by-exec"]
    before = state(started, watch)
    cmd, *rest = args
    proc = wal(started, cmd, f"--run={run_id}", *rest)
    assert_error(proc, 1, needle)
    assert state(started, watch) == before


# -- a damaged log -------------------------------------------------------------

READERS = [["log"], ["log", "--json"], ["status"], ["status", "--json"], ["recover"]]
SOME_READERS = [["log", "--json"], ["status"], ["recover"]]
FEW_READERS = [["log", "--json"], ["recover"]]
WRITER = ["apply", "ensure-line", "notes.txt", "after-corruption"]


def assert_log_refused(repo: Path, commands: Sequence[Sequence[str]], *needles: str) -> None:
    watch = [repo / "notes.txt"]
    before = state(repo, watch)
    for args in commands:
        proc = wal(repo, *args)
        assert_error(proc, 1, *needles)
        assert state(repo, watch) == before, args
    # `runs` never fails as a whole: it marks the damaged run and says why.
    runs = wal(repo, "runs")
    assert runs.returncode == 0 and runs.stderr == "", runs.stderr
    [line] = runs.stdout.splitlines()
    assert " DAMAGED: " in line and "(`git wal repair r1`)" in line
    assert all(n in line for n in needles), line


@pytest.mark.slow
@pytest.mark.parametrize("garbage", [
    b"\x00garbage{", b"", b"[1, 2, 3]", b'{"v": 1, "type": "intent"}',
    b'{"v": 1, "type": ["intent"]}',
], ids=["binary", "empty", "array", "fields-missing", "type-not-a-string"])
def test_corrupt_record_blob(started: Path, garbage: bytes) -> None:
    replace_lsn2(started, garbage)
    commands = [*READERS, WRITER] if garbage.startswith(b"\x00") else FEW_READERS
    assert_log_refused(started, commands, "corrupt")
    assert "after-corruption" not in (started / "notes.txt").read_text()


def test_unknown_record_version(started: Path) -> None:
    intent_blob = git(started, "cat-file", "blob", f"{REF}~1:000000000002.json").encode()
    raw = json.loads(intent_blob)
    assert raw["v"] == 1 and raw["type"] == "intent"
    raw["v"] = 99
    record = json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()
    replace_lsn2(started, record)
    assert_log_refused(started, [*SOME_READERS, WRITER], "version 99")


def test_open_intent_without_post_image(started: Path) -> None:
    """An open file intent whose record lacks ``post`` cannot be recovered by
    comparing hashes: recovery must refuse cleanly, not crash."""
    raw = json.loads(git(started, "cat-file", "blob", f"{REF}~1:000000000002.json"))
    del raw["post"]
    replace_lsn2(started, json.dumps(raw, sort_keys=True, separators=(",", ":")).encode())
    assert_log_refused(started, [["recover"]], "post")


@pytest.mark.slow
def test_ref_points_at_a_blob(started: Path) -> None:
    blob = git(started, "hash-object", "-w", "--stdin", input=b"not a commit\n").strip()
    git(started, "update-ref", REF, blob)
    assert git(started, "cat-file", "-t", REF).strip() == "blob"
    assert_log_refused(started, [*READERS, WRITER], "expected a commit", "blob")


def test_ref_points_at_a_tree(started: Path) -> None:
    tree = rev(started, f"{REF}^{{tree}}")
    git(started, "update-ref", REF, tree)
    assert_log_refused(started, FEW_READERS, "expected a commit", "tree")


def test_missing_record_object(started: Path) -> None:
    blob = rev(started, f"{REF}~1:000000000002.json")
    loose = loose_object(started, blob)
    assert loose.is_file()
    loose.unlink()
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=started).returncode != 0
    assert_log_refused(started, SOME_READERS, "missing")


def test_record_entry_is_not_a_blob(started: Path) -> None:
    head = rev(started, REF)
    inner = rev(started, f"{REF}~1^{{tree}}")  # some tree, standing where a blob belongs
    tree = git(started, "mktree", input=f"040000 tree {inner}\t000000000002.json\n".encode())
    new = git(started, "commit-tree", tree.strip(), "-p", rev(started, f"{REF}~2"),
              "-m", "forged").strip()
    git(started, "update-ref", REF, new, head)
    assert_log_refused(started, FEW_READERS, "not a blob")


def test_missing_append_commit(started: Path) -> None:
    commit = rev(started, f"{REF}~1")
    loose = loose_object(started, commit)
    assert loose.is_file()
    loose.unlink()
    assert_log_refused(started, FEW_READERS, "missing")


# -- locks and concurrency -----------------------------------------------------


def test_stale_ref_lock_then_recover(started: Path) -> None:
    lock = started / ".git" / "refs" / "wal" / f"{RUN}.lock"
    lock.write_text("")
    before = state(started, [started / "new.txt", lock])
    proc = wal(started, "apply", "ensure-line", "new.txt", "hello")
    assert_error(proc, 1, "lock")
    hint = next(line for line in proc.stderr.splitlines() if line.startswith("hint: "))
    assert "git wal recover" in hint
    assert state(started, [started / "new.txt", lock]) == before
    assert not (started / "new.txt").exists()

    out = ok(started, "recover")
    assert "stale ref lock" in out
    assert not lock.exists()
    ok(started, "apply", "ensure-line", "new.txt", "hello")
    assert (started / "new.txt").read_bytes() == b"hello\n"
    rows = log_rows(started)
    assert [r["lsn"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[3]["type"] == "intent" and rows[3]["target"] == ["new.txt"]
    assert rows[3]["status"] == "committed"


@pytest.mark.slow
def test_concurrent_appends_to_one_run(started: Path) -> None:
    per_file = 10
    files = ["left.txt", "right.txt"]
    procs = [
        subprocess.Popen(
            [GIT_WAL, "apply", "ensure-line", name, f"line {i} of {name}"],
            cwd=started, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(per_file)
        for name in files
    ]
    results = [(p, *p.communicate(timeout=120)) for p in procs]
    for p, out, err in results:
        assert p.returncode == 0, f"{p.args!r}: {out} {err}"
        assert "Traceback" not in err

    rows = log_rows(started)
    steps = len(files) * per_file
    assert len(rows) == 3 + 2 * steps  # plan + the fixture's step + intent/commit each
    assert [r["lsn"] for r in rows] == list(range(1, len(rows) + 1))
    new = rows[3:]
    intents = [r for r in new if r["type"] == "intent"]
    assert len(intents) == steps
    assert all(r["status"] == "committed" for r in intents)
    # One writer at a time: every intent is closed by the very next record.
    for intent, closer in zip(new[::2], new[1::2], strict=True):
        assert intent["type"] == "intent"
        assert closer["type"] == "commit" and closer["intent"] == intent["lsn"]
    logged = sorted((r["target"][0], r["args"]["line"]) for r in intents)
    assert logged == sorted((n, f"line {i} of {n}") for i in range(per_file) for n in files)
    # No lost update: each file holds every line exactly once.
    for name in files:
        lines = (started / name).read_text().splitlines()
        assert sorted(lines) == sorted(f"line {i} of {name}" for i in range(per_file))
    status = json.loads(ok(started, "status", "--json"))
    assert status["open"] == [] and status["next_lsn"] == len(rows) + 1


# -- usage errors --------------------------------------------------------------

USAGE = [
    ["bogus"],
    ["apply", "bogus-tool", "x"],
    ["apply", "replace-text", "notes.txt", "--old", "x"],  # --new missing
    ["log", "--no-such-flag"],
]


@pytest.mark.parametrize("args", USAGE, ids=lambda a: "-".join(a)[:30])
def test_usage_errors_exit_2(started: Path, args: list[str]) -> None:
    before = state(started, [started / "notes.txt"])
    proc = wal(started, *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert state(started, [started / "notes.txt"]) == before


@pytest.mark.slow
def test_usage_errors_use_error_and_hint_lines(repo: Path) -> None:
    """The CLI's promise (gitwal/cli/__init__.py): errors become `error:` / `hint:`."""
    bad = {}
    for args in USAGE:
        proc = wal(repo, *args)
        assert proc.returncode == 2
        if not proc.stderr.startswith("error: ") or "\nhint: " not in proc.stderr:
            bad[" ".join(args)] = proc.stderr
    assert not bad, f"usage errors not in the error:/hint: form: {bad}"
