"""Recovery among other runs (gitwal/recovery/elsewhere.py): a killed step
whose post-image another run's later step began from landed, and is committed,
never redone or rolled back over that run's work; the resume prompt names the
paths this run works on that other runs changed since its last step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, ok, wal
from .test_log_trust import append_raw, canonical


def killed_write(repo: Path, run: str, path: str, data: bytes) -> None:
    proc = wal(repo, "apply", "--run", run, "write-file", path, input=data,
               env={"GITWAL_CRASH_AT": "after-apply"})
    assert proc.returncode == -9, proc.stderr
    assert (repo / path).read_bytes() == data  # written; its commit never appended


@pytest.mark.parametrize("then", ["builds on it", "puts it back"])
def test_a_killed_step_another_run_built_on_is_committed_as_found(repo: Path,
                                                                   then: str) -> None:
    original = (repo / "README").read_bytes()
    ok(repo, "begin", "--run", "a", "--task", "greeting")
    ok(repo, "begin", "--run", "b")
    killed_write(repo, "a", "README", b"A\n")
    # b's shell step takes no path locks: it reads a's bytes and changes them.
    script = ("sed s/A/AB/ README > t && mv t README" if then == "builds on it"
              else "git show HEAD:README > README")
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", script)
    after_b = (repo / "README").read_bytes()
    assert after_b == (b"AB\n" if then == "builds on it" else original)

    report = json.loads(ok(repo, "recover", "--run", "a", "--redo", "--json"))
    [step] = report["intents"]
    assert (step["outcome"], step["action"]) == ("applied-missing-commit", "committed")
    assert "run b LSN 2 began from its post-image of README" in step["detail"]
    assert (repo / "README").read_bytes() == after_b  # b's work stands; nothing redone
    assert json.loads(ok(repo, "verify", "--all", "--json"))["ok"]
    order = json.loads(ok(repo, "order", "--json"))
    assert order["ok"], order
    assert [(s["run"], s["lsn"]) for s in order["steps"]] == [("a", 2), ("b", 2)]


def test_a_killed_step_nobody_built_on_is_still_redone(repo: Path) -> None:
    # The rule is about another run's step that began from this step's post;
    # a path merely put back (here by hand, unlogged) is the old decision's.
    ok(repo, "begin", "--run", "a")
    ok(repo, "begin", "--run", "b")
    original = (repo / "README").read_bytes()
    killed_write(repo, "a", "README", b"A\n")
    (repo / "README").write_bytes(original)
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", "echo b > other.txt")
    report = json.loads(ok(repo, "recover", "--run", "a", "--redo", "--json"))
    assert report["intents"][0]["action"] == "redone"
    assert (repo / "README").read_bytes() == b"A\n"


def test_the_resume_prompt_names_what_other_runs_changed_on_this_runs_paths(
        repo: Path) -> None:
    ok(repo, "begin", "--run", "a", "--task", "edit x then y", "--step", "edit src/x.txt",
       "--step", "edit src/y.txt")
    ok(repo, "apply", "--run", "a", "--step", "1", "write-file", "src/x.txt", input=b"a\n")
    ok(repo, "begin", "--run", "b", "--task", "tidy")
    for path in ("src/x.txt", "src/y.txt", "src/z.txt"):
        ok(repo, "apply", "--run", "b", "write-file", path, input=b"b\n")
    killed_write(repo, "a", "src/w.txt", b"w\n")
    prompt = ok(repo, "prompt", "--run", "a")
    line = next(ln for ln in prompt.splitlines() if ln.startswith("Changed by other runs"))
    assert "src/x.txt (run b LSN 2, task 'tidy')" in line  # a's own step's path
    assert "src/y.txt (run b LSN 4, task 'tidy')" in line  # named by a's plan
    assert "src/z.txt" not in line and "src/w.txt" not in line
    data = json.loads(ok(repo, "recover", "--run", "a", "--json"))
    assert [c["path"] for c in data["changed_elsewhere"]] == ["src/x.txt", "src/y.txt"]
    # Nothing of b's was touched by a's recovery.
    assert all((repo / p).read_bytes() == b"b\n" for p in ("src/x.txt", "src/y.txt"))


def test_only_a_step_that_began_after_the_intent_shows_it_landed() -> None:
    from gitwal.base.ids import Lsn, RunId
    from gitwal.changes.history import Change
    from gitwal.records.model import Intent
    from gitwal.recovery.elsewhere import Elsewhere, landed_for

    pre, post, later = "1" * 40, "2" * 40, "3" * 40
    intent = Intent(RunId("a"), Lsn(2), "write_file", {"path": "f"}, ("f",), (pre,), (post,),
                    (0o100644,), "safe", "k")

    def landed(tool: str, noted: dict[str, int] | None, at: int = 100) -> bool:
        # b changed f from a's post: after a's intent (it read a's write), or
        # before it (its post then merely what a meant to write): states alone
        # cannot tell, b's notes of the other runs' LSNs at its intent can.
        b = Elsewhere("b", "", Lsn(2), at, (Change("f", post, 0o100644, later),), tool, noted)
        return bool(landed_for(intent, 100, [b]))

    assert landed("exec", {"a": 2}) and landed("exec", {"a": 5})
    assert not landed("exec", {"a": 1}) and not landed("exec", {})
    assert landed("exec", None, at=101) and not landed("exec", None, at=100)  # older logs
    # A file step of b on f cannot have come after a's open intent on f (it is
    # refused while the intent is open): it came before.
    assert not landed("write_file", None, at=200)


def test_a_step_of_another_run_without_authority_decides_nothing(repo: Path) -> None:
    """The same as "puts it back" above, but run b's records carry no MAC of
    this clone (as if another clone wrote them and they were fetched, or
    written with plumbing): b is data here, so a's killed step is decided on
    its own and redone, not committed as found."""
    ok(repo, "begin", "--run", "a", "--task", "greeting")
    ok(repo, "begin", "--run", "b")
    killed_write(repo, "a", "README", b"A\n")
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", "git show HEAD:README > README")
    [intent, _commit] = strip_auth(repo, "b", [2, 3])
    assert intent["args"]["others"] == {"a": 2}  # it began after a's intent ...
    report = json.loads(ok(repo, "recover", "--run", "a", "--redo", "--json"))
    [step] = report["intents"]
    assert step["action"] == "redone", step  # ... and still decides nothing here
    assert "run b" not in step["detail"]
    assert (repo / "README").read_bytes() == b"A\n"


def strip_auth(repo: Path, run: str, lsns: list[int]) -> list[dict[str, Any]]:
    """Rewrite the appends of ``lsns`` (the newest of ``run``) without ``auth``."""
    ref = f"refs/wal/{run}"
    records: list[dict[str, Any]] = []
    for back, lsn in enumerate(reversed(lsns)):
        data = git(repo, "show", f"{ref}~{back}:{lsn:012d}.json")
        records.insert(0, json.loads(data))
    git(repo, "update-ref", ref, f"{ref}~{len(lsns)}")
    for rec in records:
        rec.pop("auth", None)
        append_raw(repo, run, rec["lsn"], canonical(rec))
    return records
