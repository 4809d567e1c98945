"""`git wal undo` / `git wal redo` (gitwal/decisions/undo.py, docs/undo.md): exact trees
back and forth over random runs of file and shell steps, refusals that lose
nothing, `--force` that keeps what it overwrites, and crashes mid-undo."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest

from gitwal import Wal
from gitwal.decisions.undo import redo, undo
from gitwal.run import Run

from .conftest import git, ok, tree_of, wal
from .test_json_schema import check

NAMES = ["a.txt", "b.txt", "src/c.txt", "src/deep/d.txt", "run.sh"]


def random_step(run: Run, repo: Path, rng: random.Random, n: int) -> int:
    """One random committed step (file tool or shell); its intent's LSN."""
    name = rng.choice(NAMES)
    exists = (repo / name).exists()
    kind = rng.choice(["write", "line", "delete", "move", "exec", "exec", "chmod"])
    if kind == "write" or (not exists and kind in ("line", "delete", "move", "chmod")):
        return int(run.write_file(name, f"content {n}\n".encode()).lsn)
    if kind == "line":
        return int(run.ensure_line(name, f"line {n}").lsn)
    if kind == "delete":
        return int(run.delete_file(name).lsn)
    if kind == "move":
        dst = rng.choice([x for x in NAMES if x != name])
        if (repo / dst).exists():
            return int(run.delete_file(dst).lsn)
        return int(run.move_file(name, dst).lsn)
    if kind == "chmod":
        return int(run.exec(["chmod", "+x", name]).lsn)
    # A shell step that writes two files and removes a third, as builds do.
    other = rng.choice(NAMES)
    script = (f"mkdir -p src/deep && echo shell {n} >> {name} && echo made {n} > out{n % 3}.txt"
              + (f" && rm -f {other}" if other != name else ""))
    return int(run.exec(["sh", "-c", script]).lsn)


@pytest.mark.parametrize("seed", range(6))
def test_undo_and_redo_give_back_the_exact_trees_of_a_random_run(repo: Path, seed: int) -> None:
    rng = random.Random(seed)
    wal_ = Wal(repo)
    run = wal_.begin(task=f"random {seed}")
    trees = {1: tree_of(repo)}  # LSN -> the tree right after it
    lsns = [1]
    for n in range(12):
        lsn = random_step(run, repo, rng, n)
        trees[lsn] = tree_of(repo)
        lsns.append(lsn)
    for _round in range(4):
        before = tree_of(repo)
        to = rng.choice(lsns[:-1])
        done = undo(run, to=to)
        assert tree_of(repo) == trees[to], (seed, to)
        back = redo(run)
        assert back.lsns == (done.lsn,)
        assert tree_of(repo) == before, (seed, to)
        last = undo(run, last=rng.randint(1, 3))  # then go on from the undone state
        trees = {k: v for k, v in trees.items() if k < min(last.lsns)}
        lsns = sorted(trees)
        lsn = random_step(run, repo, rng, 100 + _round)
        trees[lsn] = tree_of(repo)
        lsns.append(lsn)
    verified = wal(repo, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_later_edit_by_someone_is_refused_named_and_kept(repo: Path) -> None:
    ok(repo, "begin", "--task", "undo")
    ok(repo, "apply", "write-file", "w.txt", "--from", "-", input=b"ours\n")
    (repo / "w.txt").write_text("a person's edit\n")
    head = git(repo, "for-each-ref", "--format=%(objectname)", "refs/wal/")
    refused = wal(repo, "undo")
    assert refused.returncode == 1
    assert "error: w.txt changed since the log's last step there" in refused.stderr
    assert "--force stores what the paths hold in the log, then undoes" in refused.stderr
    assert (repo / "w.txt").read_text() == "a person's edit\n"
    assert git(repo, "for-each-ref", "--format=%(objectname)", "refs/wal/") == head

    forced = json.loads(ok(repo, "undo", "--force", "--json"))
    check(forced, "undo")
    assert not (repo / "w.txt").exists() and forced["forced"] == ["w.txt"]
    [saved] = forced["saved"]
    subprocess.run(saved["command"], shell=True, cwd=repo, check=True)
    assert (repo / "w.txt").read_text() == "a person's edit\n"  # nothing was lost


def test_a_step_a_later_step_builds_on_cannot_be_undone_alone(repo: Path) -> None:
    ok(repo, "begin")
    ok(repo, "apply", "ensure-line", "README", "one")  # LSN 2
    ok(repo, "apply", "ensure-line", "README", "two")  # LSN 4
    refused = wal(repo, "undo", "2")
    assert refused.returncode == 1
    assert "LSN 2 cannot be undone alone: LSN 4 changed README after it" in refused.stderr
    assert "hint: undo both (`git wal undo --to 1`)" in refused.stderr
    dry = json.loads(ok(repo, "undo", "--to", "1", "--dry-run", "--json"))
    check(dry, "undo")
    assert dry["lsn"] is None and "-one\n-two\n" in dry["diff"]
    assert (repo / "README").read_text() == "hello\none\ntwo\n"  # dry run: untouched
    ok(repo, "undo", "--to", "1")
    assert (repo / "README").read_text() == "hello\n"
    assert "undo README  (undoes LSN 2, 4)" in ok(repo, "log", "--no-color").splitlines()[-1]
    again = wal(repo, "undo", "2")
    assert again.returncode == 1 and "LSN 2 was undone already" in again.stderr
    both = wal(repo, "undo", "2", "--last", "1")
    assert both.returncode == 2 and "name LSNs, or one of" in both.stderr


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after-intent", "between-paths", "after-apply",
                                   "after-verify"])
def test_an_undo_killed_at_any_point_is_finished_by_recovery(repo: Path, point: str) -> None:
    ok(repo, "begin")
    ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=b"a\n")
    base = tree_of(repo)
    ok(repo, "exec", "--", "sh", "-c", "echo b > b.txt; echo more >> a.txt; rm README")
    after = tree_of(repo)
    killed = wal(repo, "undo", env={"GITWAL_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rec = wal(repo, "recover", "--redo", "--json")
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert tree_of(repo) == base  # undone, all paths or none left half-way
    ok(repo, "redo")
    assert tree_of(repo) == after
    assert wal(repo, "verify").returncode == 0


def test_undo_is_refused_inside_nothing_and_undoes_shell_modes(repo: Path) -> None:
    ok(repo, "begin")
    (repo / "tool.sh").write_text("#!/bin/sh\n")
    git(repo, "add", "tool.sh")
    git(repo, "commit", "-q", "-m", "tool")
    ok(repo, "exec", "--", "chmod", "+x", "tool.sh")
    assert os.access(repo / "tool.sh", os.X_OK)
    ok(repo, "undo")
    assert not os.access(repo / "tool.sh", os.X_OK)
    ok(repo, "redo")
    assert os.access(repo / "tool.sh", os.X_OK)


def test_undo_turn_takes_back_what_an_agent_did_for_one_prompt(repo: Path) -> None:
    from .test_agent_payloads import claude, claude_run, claude_tool, run_hook

    def write(call: str, name: str, text: str) -> None:
        for event in ("PreToolUse", "PostToolUse"):
            r = run_hook(repo, "claude", claude_tool(
                repo, event, "Write", {"file_path": str(repo / name), "content": text}, call))
            assert r.code == 0, r.err
            if event == "PreToolUse":
                (repo / name).write_text(text)  # the agent's own write, between its hooks

    def prompt(text: str) -> None:
        r = run_hook(repo, "claude", claude(repo, "UserPromptSubmit", prompt=text))
        assert (r.code, r.out) == (0, ""), r.err

    run = claude_run()
    prompt("add a and b")
    write("t1", "a.txt", "a\n")
    write("t2", "b.txt", "b\n")
    after_first = tree_of(repo)
    prompt("now c, and change a")
    write("t3", "c.txt", "c\n")
    write("t4", "a.txt", "a, changed\n")
    tags = [r["args"]["agent"].get("turn") for r in
            (json.loads(x) for x in ok(repo, "log", "--run", run, "--json").splitlines())
            if r["type"] == "intent"]
    assert tags == ["1", "1", "2", "2"]
    ok(repo, "undo", "--run", run, "--turn", "-1")  # the latest prompt's steps
    assert tree_of(repo) == after_first
    ok(repo, "redo", "--run", run)
    assert (repo / "c.txt").read_text() == "c\n" and (repo / "a.txt").read_text() == \
        "a, changed\n"
    nope = wal(repo, "undo", "--run", run, "--turn", "3")
    assert nope.returncode == 1 and "no turn 3: the run's agent steps answer 2 prompt(s)" \
        in nope.stderr


def test_verify_names_an_undo_that_wrote_other_than_its_steps_had(repo: Path) -> None:
    import dataclasses

    from gitwal.changes.history import log_problems
    from gitwal.records.model import Intent

    ok(repo, "begin")
    ok(repo, "apply", "write-file", "a.txt", "--from", "-", input=b"a\n")
    ok(repo, "apply", "ensure-line", "README", "x")
    ok(repo, "undo", "--to", "1")
    wal_ = Wal(repo)
    records = wal_.run().records()
    assert log_problems(wal_.repo, records) == []
    forged = []
    for rec in records:  # the undo, edited to write a.txt back instead of removing it
        if isinstance(rec, Intent) and rec.tool == "undo":
            pairs = zip(rec.args["paths"], rec.args["contents"], strict=True)
            args = dict(rec.args, contents=[rec.pre[0] if p == "a.txt" else c for p, c in pairs])
            rec = dataclasses.replace(rec, args=args)
        forged.append(rec)
    [(lsn, why)] = log_problems(wal_.repo, forged)
    assert lsn == 6 and "it writes a.txt otherwise than the steps it names" in why


@pytest.mark.parametrize("seed", range(3))
def test_undoing_an_agents_turns_newest_first_gives_back_each_turns_tree(
        repo: Path, seed: int) -> None:
    from .test_agent_payloads import claude, claude_run, claude_tool, run_hook

    rng = random.Random(seed)
    run = claude_run()

    def hooked(tool: str, tool_input: dict[str, object], call: str, act: object) -> None:
        for event in ("PreToolUse", "PostToolUse"):
            r = run_hook(repo, "claude", claude_tool(repo, event, tool, tool_input, call))
            assert r.code == 0, r.err
            if event == "PreToolUse":
                act()  # type: ignore[operator]  # the agent's own effect, between its hooks

    trees = [tree_of(repo)]
    calls = 0
    for turn in range(rng.randint(2, 4)):
        assert run_hook(repo, "claude", claude(repo, "UserPromptSubmit", prompt="p")).code == 0
        for _ in range(rng.randint(1, 3)):
            calls += 1
            name = rng.choice(["a.txt", "b.txt", "src/c.txt"])
            text = f"turn {turn} call {calls}\n"
            if rng.random() < 0.5:
                path = repo / name

                def write(path: Path = path, text: str = text) -> None:
                    path.parent.mkdir(exist_ok=True)
                    path.write_text(text)
                hooked("Write", {"file_path": str(path), "content": text}, f"t{calls}", write)
            else:
                command = f"mkdir -p src && echo '{text.strip()}' >> {name}"
                hooked("Bash", {"command": command}, f"t{calls}",
                       lambda command=command: subprocess.run(command, shell=True, cwd=repo,
                                                              check=True))
        trees.append(tree_of(repo))
    for turn in range(len(trees) - 1, 0, -1):
        ok(repo, "undo", "--run", run, "--turn", str(turn))
        assert tree_of(repo) == trees[turn - 1], (seed, turn)
    for turn in range(1, len(trees)):
        ok(repo, "redo", "--run", run)
        assert tree_of(repo) == trees[turn], (seed, turn)
    assert wal(repo, "verify", "--run", run).returncode == 0
