"""The Python API is typed for its users: `py.typed` ships, everything README
names imports from `gitwal`, and each tool has a typed method on the run,
which behaves exactly as `run.apply(tool, ...)`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gitwal
from gitwal import Run, StepFailed, StepResult, ToolRefused, Wal, WalError
from gitwal.records.model import Abort, Commit, Intent

from .conftest import ok

ROOT = Path(__file__).resolve().parent.parent

CLIENT = '''
from gitwal import (CorruptLog, InDoubt, Lsn, NotARepository, PathRefused, Run, RunBusy,
                    RunId, StepFailed, StepResult, ToolRefused, UnknownRun, Wal, WalError,
                    render)


def go(path: str) -> tuple[Lsn, RunId]:
    run: Run = Wal(path).begin(task="typed", steps=["a.txt"])
    result: StepResult = run.replace_text("a.txt", "x", "y", check="true", step=1)
    run.write_file("b.txt", "text, written as UTF-8")
    run.write_file("c.bin", b"\\0\\1")
    run.replace_symbol("b.txt", "text", "words")
    run.ensure_line("b.txt", "last")
    run.move_file("c.bin", "d.bin")
    run.delete_file("d.bin", timeout=1.5)
    run.exec(["true"], idempotent=True)
    try:
        run.apply("ensure_line", path="b.txt", line="x")
    except StepFailed as e:
        print(e.message, e.hint, e.exit_code)
    except (ToolRefused, PathRefused, RunBusy, UnknownRun, NotARepository, CorruptLog,
            InDoubt, WalError):
        pass
    print(render(Wal(path).report()))
    return result.lsn, run.id
'''

# What the typed methods are for: each of these is an error before the program runs.
WRONG = '''
from gitwal import Wal

run = Wal(".").run()
run.replace_text("a.txt", old="x", neww="y")
run.write_file("a.txt", 3)
run.move_file("a.txt")
n: str = run.delete_file("a.txt").lsn
'''


def mypy(tmp_path: Path, name: str, source: str, site: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``source``, gitwal found as an installed package in
    ``site`` (not as this checkout's source): only py.typed makes it typed."""
    work = tmp_path / name
    work.mkdir()
    (work / "client.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / "mypy-cache"), "client.py"],
        cwd=work, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)})


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(ROOT / "gitwal", site / "gitwal",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return site


@pytest.mark.slow
def test_a_client_type_checks_strictly_and_misuse_is_caught(tmp_path: Path, site: Path) -> None:
    proc = mypy(tmp_path, "good", CLIENT, site)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    proc = mypy(tmp_path, "wrong", WRONG, site)
    assert proc.returncode == 1
    # (line, error code, a word of the message): mypy's wording varies by version.
    errors = [(int(line.split(":")[1]), line.rsplit("[", 1)[1].rstrip("]"))
              for line in proc.stdout.splitlines() if ": error: " in line]
    assert errors == [(5, "call-arg"), (6, "arg-type"), (7, "call-arg"), (8, "assignment")]
    assert '"neww"' in proc.stdout and '"dst"' in proc.stdout


@pytest.mark.slow
def test_without_py_typed_the_same_client_fails(tmp_path: Path, site: Path) -> None:
    (site / "gitwal" / "py.typed").unlink()
    proc = mypy(tmp_path, "good", CLIENT, site)
    assert proc.returncode == 1
    assert 'Skipping analyzing "gitwal": module is installed, but missing library stubs ' \
           'or py.typed marker' in proc.stdout


def test_what_readme_names_imports_from_gitwal_and_import_stays_light() -> None:
    for name in gitwal.__all__:
        assert getattr(gitwal, name) is not None, name
    assert gitwal.StepFailed is StepFailed and issubclass(StepFailed, WalError)
    assert {"Wal", "Run", "StepFailed", "StepResult", "WalError", "ToolRefused", "RunId",
            "Lsn", "TreeId", "BlobId", "CommitId", "render", "Report"} <= set(dir(gitwal))
    proc = subprocess.run([sys.executable, "-c", "import sys, gitwal; from gitwal import "
                           "StepFailed, RunId, Lsn; print(sorted(m for m in sys.modules if "
                           "m.split('.')[0] in ('pygit2', 'click', 'cryptography')))"],
                          capture_output=True, text=True, check=True)
    assert proc.stdout == "[]\n"


def steps(run: Run) -> list[tuple[str, dict[str, object], tuple[str, ...]]]:
    return [(r.tool, r.args, r.target) for r in run.records() if isinstance(r, Intent)]


def test_the_typed_methods_are_the_tools(repo: Path) -> None:
    (repo / "a.ts").write_text("getUserById(1)\nx = 1\n")
    run = Wal(repo).begin(task="typed", run_id="r", steps=["a.ts"])
    results = [
        run.replace_symbol("a.ts", "getUserById", "fetchUser", step=1),
        run.replace_text("a.ts", "x = 1", "x = 2", check="grep -q 'x = 2' a.ts"),
        run.ensure_line("a.ts", "// done"),
        run.write_file("notes.md", "caf\u00e9\n"),  # str: written as UTF-8
        run.write_file("blob.bin", b"\xff\x00"),
        run.move_file("blob.bin", "moved.bin"),
        run.delete_file("moved.bin"),
    ]
    assert all(isinstance(r, StepResult) and r.status == "committed" for r in results)
    assert [r.lsn for r in results] == [2, 4, 6, 8, 10, 12, 14]
    assert (repo / "a.ts").read_text() == "fetchUser(1)\nx = 2\n// done\n"
    assert (repo / "notes.md").read_bytes() == b"caf\xc3\xa9\n"
    assert not (repo / "moved.bin").exists() and not (repo / "blob.bin").exists()
    logged = steps(run)
    assert [(tool, target) for tool, _, target in logged] == [
        ("replace_symbol", ("a.ts",)), ("replace_text", ("a.ts",)), ("ensure_line", ("a.ts",)),
        ("write_file", ("notes.md",)), ("write_file", ("blob.bin",)),
        ("move_file", ("blob.bin", "moved.bin")), ("delete_file", ("moved.bin",))]
    assert logged[0][1] == {"path": "a.ts", "old": "getUserById", "new": "fetchUser"}
    # The str content is logged as the blob of its UTF-8 bytes, as bytes content is.
    blob = str(logged[3][1]["content"])
    assert run.store.repo[blob].read_raw() == b"caf\xc3\xa9\n"
    status = json.loads(ok(repo, "status", "--run", "r", "--json"))
    assert status["open"] == [] and status["aborted"] == []


def test_a_failing_check_through_a_typed_method_aborts_as_apply_does(repo: Path) -> None:
    (repo / "a.txt").write_text("old\n")
    run = Wal(repo).begin(task="typed", run_id="r")
    with pytest.raises(StepFailed) as failed:
        run.write_file("a.txt", "new\n", check="echo nope; exit 1")
    assert failed.value.message.startswith("LSN 2 write_file aborted: check failed")
    assert failed.value.hint == "nope"
    assert (repo / "a.txt").read_text() == "old\n"
    assert isinstance(run.records()[-1], Abort)


@pytest.mark.parametrize(("tool", "args", "message", "hint"), [
    ("replace_text", {"path": "a.txt", "old": "a", "neww": "b"},
     "replace_text: unknown argument 'neww'; missing argument 'new'",
     "replace_text takes path, old, new (and check, step, timeout)"),
    ("write_file", {"pth": "a.txt", "content": b"x"},
     "write_file: unknown argument 'pth'; missing argument 'path'",
     "write_file takes path, content (and check, step, timeout)"),
    ("move_file", {"src": "a.txt", "dst": "b.txt", "force": True, "mode": 1},
     "move_file: unknown arguments 'force', 'mode'",
     "move_file takes src, dst (and check, step, timeout)"),
    ("ensure_line", {"path": "a.txt"},
     "ensure_line: missing argument 'line'",
     "ensure_line takes path, line (and check, step, timeout)"),
])
def test_a_misspelt_keyword_to_apply_names_the_tools_arguments(
        repo: Path, tool: str, args: dict[str, Any], message: str, hint: str) -> None:
    (repo / "a.txt").write_text("a\n")
    run = Wal(repo).begin(task="typed", run_id="r")
    with pytest.raises(ToolRefused) as refused:
        run.apply(tool, **args)
    assert (refused.value.message, refused.value.hint) == (message, hint)
    assert len(run.records()) == 1  # the plan: nothing was logged
    assert (repo / "a.txt").read_text() == "a\n"


def test_str_content_that_is_not_unicode_is_refused_before_anything_is_logged(
        repo: Path) -> None:
    run = Wal(repo).begin(task="typed", run_id="r")
    with pytest.raises(ToolRefused) as refused:
        run.write_file("a.txt", "\udcff")
    assert refused.value.message == "write_file: the content is not valid Unicode text"
    assert len(run.records()) == 1 and not (repo / "a.txt").exists()


def test_committed_steps_through_typed_methods_close_with_commit_records(repo: Path) -> None:
    run = Wal(repo).begin(task="typed", run_id="r")
    run.write_file("a.txt", "one\n")
    last = run.records()[-1]
    assert isinstance(last, Commit) and last.intent == 2
