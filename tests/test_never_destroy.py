"""The first law, through the real CLI: recovery and failed steps never destroy
bytes gitwal did not write. Each case is a person acting between a crash (a
real SIGKILL at a named point) and `git wal recover`, or during a step."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, init_repo, loose_object, ok, wal
from .test_agent_claude import RUN as CLAUDE_RUN
from .test_agent_payloads import claude, claude_tool, run_hook


def crash(repo: Path, point: str, *args: str, input: bytes | None = None) -> None:
    r = wal(repo, *args, input=input, env={"GITWAL_CRASH_AT": point})
    assert r.returncode == -signal.SIGKILL, (point, r.stderr)


def recover(repo: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    r = wal(repo, "recover", "--json", *flags)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 3), r.stderr
    return r.returncode, json.loads(r.stdout)


def bring_back(repo: Path, command: str) -> None:
    subprocess.run(command, shell=True, cwd=repo, check=True)


def torn_big_file(repo: Path) -> None:
    """A run whose write of big.txt was killed half-way (a torn post-image)."""
    (repo / "big.txt").write_text("x" * 5000)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "big")
    ok(repo, "begin")
    crash(repo, "mid-write", "apply", "write-file", "big.txt", "--from", "-",
          input=b"y" * 4000)
    assert (repo / "big.txt").read_bytes() == b"y" * 2000  # a prefix of the post-image


@pytest.mark.slow
def test_a_persons_edit_after_a_crash_is_in_doubt_and_survives(repo: Path) -> None:
    ok(repo, "begin", "--task", "t")
    crash(repo, "after-intent", "apply", "replace-text", "README", "--old", "hello",
          "--new", "bye")
    (repo / "README").write_text("the person's own words\n")
    code, report = recover(repo)
    assert code == 3 and report["in_doubt"]
    [o] = report["intents"]
    assert o["outcome"] == "in-doubt" and o["open"] and o["changed"] == ["README"]
    assert (repo / "README").read_text() == "the person's own words\n"
    # `git wal prompt` and a second recover change nothing either.
    assert wal(repo, "prompt").returncode == 0
    assert recover(repo)[0] == 3
    assert (repo / "README").read_text() == "the person's own words\n"
    # Forced: the found bytes are saved in the log first, then the pre-image restored.
    code, report = recover(repo, "--restore")
    assert code == 0 and not report["in_doubt"]
    [o] = report["intents"]
    assert o["action"] == "restored"
    [saved] = o["saved"]
    assert saved["path"] == "README"
    assert (repo / "README").read_text() == "hello\n"
    assert saved["command"] in wal(repo, "recover").stdout + o["detail"]
    # The saved bytes are kept by the log, through a pruning gc.
    git(repo, "gc", "-q", "--prune=now")
    bring_back(repo, saved["command"])
    assert (repo / "README").read_text() == "the person's own words\n"
    [abort] = [r for r in map(json.loads, ok(repo, "log", "--json").splitlines())
               if r["type"] == "abort"]
    assert abort["saved"] == [["README", saved["object"]]]
    assert wal(repo, "verify").returncode == 0


def test_a_half_moved_file_edited_by_a_person_is_not_deleted(repo: Path) -> None:
    (repo / "old.txt").write_text("moved text\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "old")
    ok(repo, "begin")
    crash(repo, "between-paths", "apply", "move-file", "old.txt", "new.txt")
    assert (repo / "new.txt").read_text() == "moved text\n"  # created, src not yet deleted
    (repo / "new.txt").write_text("moved text, then edited\n")
    code, report = recover(repo)
    assert code == 3 and report["intents"][0]["changed"] == ["new.txt"]
    assert (repo / "new.txt").read_text() == "moved text, then edited\n"
    assert (repo / "old.txt").read_text() == "moved text\n"


def test_a_file_deleted_on_purpose_is_not_resurrected(repo: Path) -> None:
    ok(repo, "begin")
    crash(repo, "after-intent", "apply", "write-file", "README", "--from", "-",
          input=b"new content\n")
    (repo / "README").unlink()
    code, report = recover(repo)
    assert code == 3 and "deleted since" in report["intents"][0]["detail"]
    assert not (repo / "README").exists()


@pytest.mark.slow
def test_reset_hard_after_a_crash_keeps_the_discarded_work_discarded(repo: Path) -> None:
    ok(repo, "begin")
    ok(repo, "apply", "ensure-line", "README", "step one")
    crash(repo, "after-intent", "apply", "ensure-line", "README", "step two")
    git(repo, "reset", "-q", "--hard")  # the person throws the agent's work away
    code, _report = recover(repo)
    assert code == 3
    assert (repo / "README").read_text() == "hello\n"  # step one did not come back


@pytest.mark.slow
def test_a_torn_write_is_gitwals_own_and_is_restored(repo: Path) -> None:
    torn_big_file(repo)
    assert (repo / "big.txt").read_bytes() == b"y" * 2000  # a prefix of the post-image
    code, report = recover(repo)
    assert code == 0 and report["intents"][0]["outcome"] == "torn"
    assert (repo / "big.txt").read_text() == "x" * 5000


def test_a_failing_check_keeps_an_edit_made_while_it_ran(repo: Path) -> None:
    ok(repo, "begin")
    # The check stands for a slow test suite during which a person saves the file.
    r = wal(repo, "apply", "--check", "printf 'saved by a person\\n' > README; exit 1",
            "replace-text", "README", "--old", "hello", "--new", "bye")
    assert r.returncode == 1 and "left in place" in r.stderr and "Traceback" not in r.stderr
    assert (repo / "README").read_text() == "saved by a person\n"
    [abort] = [r for r in map(json.loads, ok(repo, "log", "--json").splitlines())
               if r["type"] == "abort"]
    assert abort["restored"] == [] and "README" in abort["reason"]


def test_a_failing_check_still_restores_what_the_step_wrote(repo: Path) -> None:
    ok(repo, "begin")
    r = wal(repo, "apply", "--check", "false", "replace-text", "README", "--old", "hello",
            "--new", "bye")
    assert r.returncode == 1
    assert (repo / "README").read_text() == "hello\n"


def test_a_failing_exec_restores_but_keeps_its_changes_retrievable(repo: Path) -> None:
    ok(repo, "begin")
    r = wal(repo, "exec", "--", "sh", "-c",
            "printf 'half\\n' > README; printf 'new\\n' > fresh.txt; exit 4")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert (repo / "README").read_text() == "hello\n" and not (repo / "fresh.txt").exists()
    command = r.stderr.split("`")[1]
    assert command.startswith("git restore --source=")
    git(repo, "gc", "-q", "--prune=now")
    bring_back(repo, command)
    assert (repo / "README").read_text() == "half\n"
    assert (repo / "fresh.txt").read_text() == "new\n"


def superseded_by_run_b(repo: Path) -> None:
    """Run a dies after its intent on shared.txt; run b then commits a change there.

    A file step of run b is refused while run a's intent holds the path
    (docs/agents-together.md); a shell step names no paths in advance, so it
    is how another run's committed change can still land on it."""
    ok(repo, "begin", "--run", "a")
    crash(repo, "after-intent", "apply", "write-file", "shared.txt", "--from", "-",
          input=b"from run a\n")
    ok(repo, "begin", "--run", "b")
    refused = wal(repo, "apply", "--run", "b", "write-file", "shared.txt", "--from", "-",
                  input=b"from run b\n")
    assert refused.returncode == 1 and "being changed by run a" in refused.stderr
    ok(repo, "exec", "--run", "b", "--", "sh", "-c", "echo 'from run b' > shared.txt")


def test_another_runs_committed_change_is_not_rolled_back(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r", {"shared.txt": "base\n"})
    superseded_by_run_b(repo)
    code, report = recover(repo, "--run", "a", "--redo", "--restore")
    assert code == 0
    [o] = report["intents"]
    assert o["outcome"] == "superseded" and o["action"] == "aborted"
    assert "run b" in o["detail"]
    assert (repo / "shared.txt").read_text() == "from run b\n"


@pytest.mark.slow
def test_an_exec_that_only_touched_ignored_files_is_in_doubt_not_redone(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ignore")
    ok(repo, "begin")
    crash(repo, "after-exec", "exec", "--", "sh", "-c",
          "mkdir -p build && echo once >> build/counter")
    code, report = recover(repo, "--redo")  # not idempotent: must not run twice
    [o] = report["intents"]
    assert code == 3 and o["outcome"] == "in-doubt" and o["open"]
    assert (repo / "build" / "counter").read_text() == "once\n"
    # A step killed before its command started is "not applied" as a fact.
    code, report = recover(repo, "--restore")
    assert code == 0
    crash(repo, "after-intent", "exec", "--", "sh", "-c", "echo x >> build/counter")
    code, report = recover(repo)
    assert code == 0 and report["intents"][0]["outcome"] == "not-applied"
    assert (repo / "build" / "counter").read_text() == "once\n"


def test_a_missing_pre_image_is_in_doubt_not_a_traceback(repo: Path) -> None:
    torn_big_file(repo)
    pre = next(r for r in map(json.loads, ok(repo, "log", "--json").splitlines())
               if r["type"] == "intent")["pre"][0]
    # Pruned or never stored: the loose object is gone (the branch's copy too).
    loose_object(repo, pre).unlink()
    # The append that names it is damaged: every reader says so and names repair.
    r = wal(repo, "recover", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "is missing" in r.stderr and "git wal repair" in r.stderr
    assert (repo / "big.txt").read_bytes() == b"y" * 2000  # nothing written


def test_claude_session_start_keeps_a_persons_edit(repo: Path) -> None:
    edit = {"file_path": str(repo / "README"), "old_string": "hello", "new_string": "bye"}
    assert run_hook(repo, "claude", claude_tool(repo, "PreToolUse", "Edit", edit,
                                                "toolu_x")).code == 0
    # The session dies before the edit; a person edits the file; the session resumes.
    (repo / "README").write_text("a person wrote this\n")
    r = run_hook(repo, "claude", claude(repo, "SessionStart", source="resume"))
    assert r.code == 0, r.err
    assert (repo / "README").read_text() == "a person wrote this\n"
    status = json.loads(ok(repo, "status", "--run", CLAUDE_RUN, "--json"))
    assert status["open"], status  # left for a decision, not "restored"


@pytest.mark.slow
def test_watch_makes_an_ignored_change_visible(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ignore")
    (repo / "build").mkdir()
    (repo / "build" / "old.o").write_text("old\n")
    ok(repo, "begin")
    crash(repo, "after-exec", "exec", "--watch", "build", "--", "sh", "-c",
          "echo new > build/out.o && echo changed > build/old.o")
    code, report = recover(repo)
    [o] = report["intents"]
    assert code == 3 and sorted(o["changed"]) == ["build/old.o", "build/out.o"]
    code, report = recover(repo, "--restore")
    assert code == 0
    assert (repo / "build" / "old.o").read_text() == "old\n"
    assert not (repo / "build" / "out.o").exists()
    # A failing watched step puts the ignored files back too; other steps'
    # snapshots are not widened by the watch.
    r = wal(repo, "exec", "--watch", "build", "--", "sh", "-c",
            "echo again > build/old.o; exit 2")
    assert r.returncode == 1 and (repo / "build" / "old.o").read_text() == "old\n"
    ok(repo, "exec", "--", "sh", "-c", "echo unseen > build/old.o")
    rows = [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]
    last = rows[-1]
    assert last["type"] == "commit"
    intent = next(r for r in rows if r["lsn"] == last["intent"])
    assert "watch" not in intent["args"]
    assert git(repo, "ls-tree", "-r", "--name-only", last["post"][0]).count("build/") == 0


@pytest.mark.slow
def test_images_of_an_intent_not_written_here_are_never_written(repo: Path) -> None:
    """A log this clone did not write (fetched, forged, or from before its secret)
    is decided by hash only: recovery writes none of its images into the tree."""
    torn_big_file(repo)
    (repo / ".git" / "wal" / "secret").unlink()  # this clone no longer vouches for it
    for flags in ([], ["--restore"], ["--redo", "--restore"]):
        code, report = recover(repo, *flags)
        [o] = report["intents"]
        assert code == 3 and o["open"] and "not written in this clone" in o["detail"]
        assert (repo / "big.txt").read_bytes() == b"y" * 2000
    ok(repo, "begin")
    crash(repo, "after-intent", "apply", "write-file", "README", "--from", "-",
          input=b"forged?\n")
    (repo / ".git" / "wal" / "secret").unlink()
    code, report = recover(repo, "--redo")
    assert code == 0 and report["intents"][0]["action"] == "aborted"
    assert (repo / "README").read_text() == "hello\n"  # not redone from its image


@pytest.mark.slow
def test_the_prompt_names_saved_bytes_and_does_not_redo_a_superseded_step(
        tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r", {"shared.txt": "base\n", "mine.txt": "m\n"})
    superseded_by_run_b(repo)
    prompt = wal(repo, "recover", "--run", "a").stdout
    assert "read it again" in prompt and "redo LSN" not in prompt
    ok(repo, "begin", "--run", "c")
    crash(repo, "after-intent", "apply", "--run", "c", "write-file", "mine.txt", "--from",
          "-", input=b"agent\n")
    (repo / "mine.txt").write_text("person\n")
    prompt = wal(repo, "recover", "--run", "c", "--restore").stdout
    assert "Saved before it was overwritten: mine.txt; `git cat-file blob" in prompt
    assert sum(line.startswith("Action:") for line in prompt.splitlines()) == 1


def test_a_missing_exec_pre_tree_is_reported_by_recover_and_prompt(repo: Path) -> None:
    ok(repo, "begin")
    crash(repo, "after-intent", "exec", "--", "sh", "-c", "echo x > x.txt")
    rows = [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]
    tree = next(r for r in rows if r["type"] == "intent")["pre"][0]
    # The snapshot's root tree object is gone (pruned or never stored).
    loose_object(repo, tree).unlink()
    for args in (["prompt"], ["recover", "--restore"]):
        p = wal(repo, *args)
        assert p.returncode == 1 and "Traceback" not in p.stderr
        assert "is missing" in p.stderr and "git wal repair" in p.stderr


@pytest.mark.slow
def test_a_later_prompt_still_says_to_run_a_restored_step_again(repo: Path) -> None:
    ok(repo, "begin")
    crash(repo, "after-exec", "exec", "--", "sh", "-c", "echo built > out.txt")
    code, _report = recover(repo, "--restore")
    assert code == 0 and not (repo / "out.txt").exists()
    later = ok(repo, "prompt")
    [action] = [line for line in later.splitlines() if line.startswith("Action:")]
    assert "git wal exec" in action and "out.txt" in action, later
    report = json.loads(ok(repo, "recover", "--json"))
    assert [u["lsn"] for u in report["undone"]] == [2]
    ok(repo, "exec", "--", "sh", "-c", "echo built > out.txt")
    later = ok(repo, "prompt")
    assert "still has to be done" not in later  # done now: a commit follows the abort


def test_a_restore_killed_half_way_is_finished_by_the_next_recovery(repo: Path) -> None:
    """The abort of a failed exec is durable before its paths are put back; a
    kill in between leaves some paths as the command wrote them. The next
    recovery finishes that restore, and leaves a path a person changed since."""
    ok(repo, "begin")
    crash(repo, "mid-restore", "exec", "--", "sh", "-c",
          "printf 'half\\n' > README; for f in a b c; do echo $f > $f.txt; done; exit 4")
    rows = [json.loads(line) for line in ok(repo, "log", "--json").splitlines()]
    assert rows[-1]["type"] == "abort" and rows[-1]["saved"][0][0] == "."
    left = sorted(p for p in ("README", "a.txt", "b.txt", "c.txt")
                  if (repo / p).exists() and (repo / p).read_text() != "hello\n")
    assert len(left) >= 2, left  # killed after the first change
    (repo / left[-1]).write_text("a person's words\n")
    intent = rows[-1]["intent"]
    temp = repo / f".{left[0]}.r{intent}.0123456789abcdef.walt"  # a write the kill cut
    temp.write_text("half")
    code, report = recover(repo)
    assert code == 0 and not report["intents"]
    assert sorted(report["finished_restore"]) == left[:-1]
    assert not temp.exists() and report["removed_temp_files"] == [left[0]]
    assert (repo / left[-1]).read_text() == "a person's words\n"
    assert (repo / "README").read_text() == "hello\n" or left[-1] == "README"
    for p in ("a.txt", "b.txt", "c.txt"):
        assert not (repo / p).exists() or p == left[-1]
    code, again = recover(repo)
    assert code == 0 and again["finished_restore"] == []
