"""The redo command lines the resume prompt hands the model."""

from __future__ import annotations

import shlex
from typing import Any

from gitwal import prompt
from gitwal.ids import Lsn, RunId
from gitwal.prompt import redo_command, render
from gitwal.records import Intent, Plan
from gitwal.recovery import Outcome, Report

A = "a" * 40


def test_write_files_redo_is_one_command_per_path_in_order() -> None:
    cmd = redo_command("write_files", {"paths": ["src/a b.py", "old.txt"],
                                       "contents": [A, "absent"], "agent": {}}, step=3)
    assert cmd == (f"git cat-file blob {A} | git wal apply --step 3 write-file "
                   f"{shlex.quote('src/a b.py')} --from - && "
                   "git wal apply --step 3 delete-file old.txt")


def test_file_tool_redo_quotes_its_arguments() -> None:
    cmd = redo_command("replace_text", {"path": "x.txt", "old": "it's", "new": "$HOME"})
    assert shlex.split(cmd) == ["git", "wal", "apply", "replace-text", "x.txt", "--old",
                                "it's", "--new", "$HOME"]


# -- render: the resume prompt of an agent's run and of a harness run ---------------

B = "b" * 40
RUN = RunId("claude-s1")
PLAN = Plan(RUN, Lsn(1), "claude-code session claude-s1", "c" * 40, "main")


def intent(lsn: int, path: str, tool: str | None = "Edit") -> Intent:
    args: dict[str, Any] = {"path": path, "content": B}
    if tool is not None:
        args["agent"] = {"name": "claude-code", "tool": tool, "call": f"toolu_{lsn}"}
    return Intent(RUN, Lsn(lsn), "write_file", args, (path,), (A,), (B,), (0o100644,),
                  "safe", f"{RUN}:{lsn}")


def report(committed: list[Intent], outcomes: list[Outcome], records: int,
           plan: Plan = PLAN) -> Report:
    return Report(str(RUN), plan, records, tuple(committed), (), tuple(outcomes), (), False)


def not_applied(i: Intent) -> Outcome:
    return Outcome(i.lsn, i.tool, i.args, i.target, "not-applied", "aborted",
                   "not applied; redo it", step=i.step)


def action(text: str) -> str:
    [line] = [ln for ln in text.splitlines() if ln.startswith("Action:")]
    return line


def test_an_agent_step_that_did_not_land_is_redone_with_the_agents_own_tool() -> None:
    done, lost = intent(2, "src/f01.ts"), intent(4, "src/f02.ts")
    text = render(report([done], [not_applied(lost)], 5))
    assert "Committed: 1 step(s), the last at LSN 2 (Edit src/f01.ts)" in text
    assert action(text) == (
        "Action: LSN 4 (Edit src/f02.ts) did not land: make that change again with your "
        f"Edit tool (the intended result: `git cat-file blob {B}` shows src/f02.ts); then "
        "continue the task.")


def test_an_agent_run_without_plan_steps_names_the_last_committed_step() -> None:
    steps = [intent(2, "src/f01.ts"), intent(4, "src/f02.ts")]
    assert action(render(report(steps, [], 5))) == (
        "Action: continue the task from the step after LSN 4 (Edit src/f02.ts), the last "
        "one committed (do not redo it); the next record will be LSN 6.")


def test_an_agent_shell_call_in_doubt_is_decided_without_the_agents_shell_tool() -> None:
    args = {"argv": ["bash", "-c", "make gen"],
            "agent": {"name": "claude-code", "tool": "Bash", "call": "toolu_9"}}
    o = Outcome(Lsn(3), "exec", args, (".",), "in-doubt", "left-open",
                "command may have run", ("gen/a.c",), True)
    text = render(report([], [o], 3))
    assert "LSN 3 (Bash: make gen) was intended" in text
    line = action(text)
    assert line.startswith("Action: decide LSN 3 (Bash: make gen) before anything else")
    assert "your next tool call records them as found" in line
    assert f"`git wal recover --run {RUN} --restore` in a terminal" in line


def test_harness_steps_keep_the_git_wal_commands() -> None:
    plan = Plan(RUN, Lsn(1), "task", "c" * 40, "main", ("write f01", "write f02", "f03"))
    done, lost = intent(2, "src/f01.ts", None), intent(4, "src/f02.ts", None)
    text = render(report([done], [not_applied(lost)], 5, plan))
    assert "(write_file src/f01.ts)" in text
    assert action(text) == (
        f"Action: redo LSN 4 with `git cat-file blob {B} | git wal apply write-file "
        "src/f02.ts --from -`; then continue with plan step 3: f03.")
    assert action(render(report([done], [], 3, PLAN))) == (
        "Action: continue the task; the next record will be LSN 4.")


def test_the_agent_key_is_the_one_hooks_write() -> None:
    from gitwal.agent_call import AGENT_ARG

    assert AGENT_ARG == prompt.AGENT_ARG
