"""Kill a real `git wal` process at every named crash point of every tool,
recover, resume as an agent would, and compare with an uninterrupted run."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from gitwal import Wal

from .conftest import git, init_repo, tree_of, wal

FILES = {
    "a.ts": "export function getUserById(id: string) {\n  return id;\n}\n" * 20
    + "getUserById('x'); getUserByIdCache();\n",
    "notes.txt": "alpha\nsecond line\n" * 10 + "gamma\n",
    "old.txt": "to be moved\n" * 30,
    "gone.txt": "to be deleted\n" * 30,
}

# tool name -> (CLI args, stdin); each is an end state the agent wants.
STEPS: dict[str, tuple[list[str], bytes | None]] = {
    "write_file": (["apply", "write-file", "new/a.txt", "--from", "-"], b"fresh\n" * 200),
    "replace_symbol": (["apply", "replace-symbol", "a.ts", "getUserById", "fetchUser"], None),
    "replace_text": (["apply", "replace-text", "notes.txt", "--old", "gamma", "--new", "delta"],
                     None),
    "ensure_line": (["apply", "ensure-line", "notes.txt", "X=1"], None),
    "delete_file": (["apply", "delete-file", "gone.txt"], None),
    "move_file": (["apply", "move-file", "old.txt", "moved/old.txt"], None),
    "exec": (["exec", "--", "sh", "-c", "printf built > out.txt && printf 'x\\n' >> a.ts"],
             None),
}
AFTER = (["apply", "ensure-line", "a.ts", "// done"], None)

FILE_POINTS = ["mid-append", "mid-append:2", "after-append", "after-intent", "mid-write",
               "after-apply", "after-verify"]
EXEC_POINTS = ["mid-append", "mid-append:2", "after-append", "after-snapshot",
               "after-intent", "after-exec", "after-verify"]
CASES = [(t, p) for t in STEPS if t != "exec" for p in FILE_POINTS]
CASES += [("move_file", "between-paths")]
CASES += [("exec", p) for p in EXEC_POINTS]
# Points that a tool's path never reaches (nothing to write for a delete).
UNREACHED = {("delete_file", "mid-write")}
# --redo only changes the outcome where the step did not land: a file step killed
# before or while writing its target, and any exec step. Elsewhere only the plain
# recovery is run (no case is generated only to be skipped).
REDO_POINTS = {"after-intent", "mid-write"}
PARAMS = [pytest.param(tool, point, redo, id=f"{tool}-{point}-{'redo' if redo else 'plain'}")
          for tool, point in CASES for redo in (False, True)
          if not redo or tool == "exec" or point in REDO_POINTS]


def run_step(repo: Path, step: tuple[list[str], bytes | None],
             crash: str | None = None) -> int:
    args, stdin = step
    env = {"GITWAL_CRASH_AT": crash} if crash else None
    return wal(repo, *args, input=stdin, env=env).returncode


def rows(repo: Path) -> list[dict[str, Any]]:
    out = wal(repo, "log", "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def strip_status(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "status"} for r in rs]


_REFERENCE: dict[str, str] = {}


def reference_tree(tmp_path: Path, tool: str) -> str:
    """The final tree of the same steps with no crash (computed once per tool)."""
    if tool in _REFERENCE:
        return _REFERENCE[tool]
    ref = init_repo(tmp_path / "reference", FILES)
    assert wal(ref, "begin", "--task", "t").returncode == 0
    assert run_step(ref, STEPS[tool]) == 0
    assert run_step(ref, AFTER) == 0
    _REFERENCE[tool] = tree_of(ref)
    return _REFERENCE[tool]


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "point", "redo"), PARAMS)
def test_kill_at_point_then_recover_and_resume(
    tmp_path: Path, tool: str, point: str, redo: bool
) -> None:
    repo = init_repo(tmp_path / "crashed", FILES)
    assert wal(repo, "begin", "--task", "t").returncode == 0
    before = rows(repo)

    code = run_step(repo, STEPS[tool], crash=point)
    if (tool, point) in UNREACHED:
        assert code == 0
        return
    assert code == -signal.SIGKILL, f"{tool} never reached crash point {point}"

    args = ["recover", "--json", "--restore"] + (["--redo"] if redo else [])
    rec = wal(repo, *args)
    assert rec.returncode == 0, rec.stderr
    report = json.loads(rec.stdout)
    assert not report["in_doubt"]
    assert not list(repo.rglob("*.walt")), "a temp file was left in the tree"

    after = rows(repo)
    assert strip_status(after[: len(before)]) == strip_status(before), "a record was lost"
    assert [r["lsn"] for r in after] == list(range(1, len(after) + 1))
    assert all(r["status"] != "open" for r in after if r["type"] == "intent")

    # Resume as the agent would: redo the step unless the log says it committed.
    intents = [r for r in after if r["type"] == "intent"]
    if not any(r["status"] == "committed" for r in intents):
        assert run_step(repo, STEPS[tool]) == 0
    assert run_step(repo, AFTER) == 0
    assert tree_of(repo) == reference_tree(tmp_path, tool)
    git(repo, "fsck", "--strict")


def test_crash_points_are_documented() -> None:
    from gitwal.base.crashpoints import CRASH_POINTS

    doc = (Path(__file__).parent.parent / "docs" / "crash-safety.md").read_text()
    for name in CRASH_POINTS:
        assert f"`{name}`" in doc, f"crash point {name} is not in docs/crash-safety.md"


def test_failed_check_restores_every_path_even_if_killed_mid_restore(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r", FILES)
    assert wal(repo, "begin").returncode == 0
    pre = tree_of(repo)
    step = (["apply", "--check", "false", "move-file", "old.txt", "moved/old.txt"], None)
    assert run_step(repo, step, crash="mid-restore") == -signal.SIGKILL
    rec = wal(repo, "recover", "--json")
    assert rec.returncode == 0, rec.stderr
    assert tree_of(repo) == pre
    status = Wal(repo).status()
    assert status.open == () and len(status.aborted) == 1
