"""`git wal mcp`: the real server process, driven by the MCP SDK's own client over
stdio; the working tree and `git wal log --json` (the real CLI) are checked after
every call. Crash tests SIGKILL the server process itself."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from gitwal.agents.mcp_entry import (
    McpConfigError,
    mcp_server_entry,
    merge_mcp_json,
    remove_from_mcp_json,
)

from .conftest import GIT_WAL, git, ok, tree_of, wait_exit, wal

Body = Callable[[ClientSession], Awaitable[None]]

STEP_TOOLS = {"write_file", "replace_symbol", "replace_text", "ensure_line", "delete_file",
              "move_file", "exec"}


@asynccontextmanager
async def connect(repo: Path, *args: str, env: dict[str, str] | None = None
                  ) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=GIT_WAL, args=["mcp", *args], cwd=str(repo),
                                   env={**os.environ, **(env or {})})
    with open(repo.parent / "server.stderr", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def talk(repo: Path, body: Body, *args: str, env: dict[str, str] | None = None) -> None:
    """Start `git wal mcp` in ``repo``, run ``body`` against it, stop it."""
    async def main() -> None:
        async with connect(repo, *args, env=env) as session:
            await body(session)
    anyio.run(main)


def text(res: CallToolResult) -> str:
    block = res.content[0]
    assert isinstance(block, TextContent)
    return block.text


def data(res: CallToolResult) -> dict[str, Any]:
    assert isinstance(res.structured_content, dict), res
    return res.structured_content


async def step(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured result."""
    res = await session.call_tool(tool, args)
    assert not res.is_error, text(res)
    return data(res)


async def refused(session: ClientSession, tool: str, **args: Any) -> CallToolResult:
    res = await session.call_tool(tool, args)
    assert res.is_error, text(res)
    return res


def log(repo: Path, *args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(repo, "log", "--json", *args).splitlines()]


def by_lsn(repo: Path) -> dict[int, dict[str, Any]]:
    return {row["lsn"]: row for row in log(repo)}


def assert_logged(repo: Path, result: dict[str, Any], tool: str) -> dict[str, Any]:
    """The intent the tool reported is committed in the log, and the commit says
    what the result says was verified. Returns the intent row."""
    rows = by_lsn(repo)
    intent = rows[result["lsn"]]
    assert intent["type"] == "intent" and intent["tool"] == tool
    assert intent["status"] == "committed"
    commit = rows[result["commit_lsn"]]
    assert commit["type"] == "commit" and commit["intent"] == result["lsn"]
    assert commit["verified"] == result["verified"]
    return intent


# -- discovery -----------------------------------------------------------------


def test_lists_the_tools_with_descriptions_and_schemas(repo: Path) -> None:
    async def body(s: ClientSession) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == STEP_TOOLS | {"begin", "status", "recover", "checkpoint", "undo"}
        for t in tools.values():
            assert t.description and len(t.description) > 150, t.name
            assert t.input_schema["type"] == "object"
        # Each change tool says what it replaces and carries the common options.
        for name, shell in (("write_file", "cat > file"), ("replace_symbol", "sed -i"),
                            ("ensure_line", "echo line >> file"), ("delete_file", "`rm`"),
                            ("move_file", "`mv`")):
            assert shell in (tools[name].description or ""), name
        for name in STEP_TOOLS:
            props = tools[name].input_schema["properties"]
            assert {"step", "check"} <= set(props), name
            assert props["step"]["anyOf"][0] == {"minimum": 1, "type": "integer"}
        assert tools["write_file"].input_schema["required"] == ["path", "content"]
        assert tools["move_file"].input_schema["required"] == ["src", "dst"]
        assert tools["replace_text"].input_schema["required"] == ["path", "old", "new"]
        argv = tools["exec"].input_schema["properties"]["argv"]
        assert argv["type"] == "array" and argv["minItems"] == 1
        assert "adds the line only if absent" in (tools["ensure_line"].description or "")
        assert tools["status"].annotations and tools["status"].annotations.read_only_hint
        assert tools["exec"].annotations and tools["exec"].annotations.open_world_hint
    talk(repo, body)


# -- the change tools ----------------------------------------------------------


@pytest.mark.slow
def test_every_file_tool_commits_and_is_logged(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "a.ts").write_text("const getUserById = 1;\ngetUserById(getUserByIdx);\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "src")

    async def body(s: ClientSession) -> None:
        began = await step(s, "begin", task="rename and tidy", steps=["notes", "rename"],
                           run_id="r1")
        assert began["run"] == "r1"

        r = await step(s, "write_file", path="docs/NOTES.md", content="one\ntwo\n", step=1,
                       check="grep -q two docs/NOTES.md")
        assert (repo / "docs" / "NOTES.md").read_text() == "one\ntwo\n"
        assert r["verified"] == "hash==post && check ok: grep -q two docs/NOTES.md"
        intent = assert_logged(repo, r, "write_file")
        assert intent["step"] == 1 and intent["pre"] == ["absent"] and intent["run"] == "r1"
        assert r["changed"] == ["docs/NOTES.md"] and r["began_run"] is False

        r = await step(s, "replace_symbol", path="src/a.ts", old="getUserById",
                       new="fetchUser", step=2)
        assert (repo / "src" / "a.ts").read_text() == \
            "const fetchUser = 1;\nfetchUser(getUserByIdx);\n"
        assert assert_logged(repo, r, "replace_symbol")["args"]["new"] == "fetchUser"
        again = await step(s, "replace_symbol", path="src/a.ts", old="getUserById",
                           new="fetchUser")
        assert again["changed"] == [] and again["lsn"] > r["lsn"]

        r = await step(s, "replace_text", path="src/a.ts", old="= 1;", new="= 2;")
        assert (repo / "src" / "a.ts").read_text().startswith("const fetchUser = 2;\n")
        assert_logged(repo, r, "replace_text")

        r = await step(s, "ensure_line", path=".gitignore", line="*.pyc")
        assert (repo / ".gitignore").read_text() == "*.pyc\n"
        assert_logged(repo, r, "ensure_line")
        res = await s.call_tool("ensure_line", {"path": ".gitignore", "line": "*.pyc"})
        assert not res.is_error and "no change" in text(res)
        assert data(res)["changed"] == [] and (repo / ".gitignore").read_text() == "*.pyc\n"

        r = await step(s, "move_file", src="docs/NOTES.md", dst="docs/old/NOTES.md")
        assert not (repo / "docs" / "NOTES.md").exists()
        assert (repo / "docs" / "old" / "NOTES.md").read_text() == "one\ntwo\n"
        assert assert_logged(repo, r, "move_file")["target"] == ["docs/NOTES.md",
                                                                   "docs/old/NOTES.md"]

        r = await step(s, "delete_file", path="docs/old/NOTES.md")
        assert not (repo / "docs" / "old" / "NOTES.md").exists()
        assert_logged(repo, r, "delete_file")

        blob = bytes(range(256))
        r = await step(s, "write_file", path="bin.dat",
                       content=base64.b64encode(blob).decode(), encoding="base64")
        assert (repo / "bin.dat").read_bytes() == blob
        assert subprocess.run(["git", "cat-file", "blob", r["post"][0]], cwd=repo,
                              capture_output=True, check=True).stdout == blob
    talk(repo, body)
    st = json.loads(ok(repo, "status", "--run", "r1", "--json"))
    assert len(st["committed"]) == 9 and st["open"] == [] and st["aborted"] == []


def test_exec_commits_reports_changes_and_output(repo: Path) -> None:
    async def body(s: ClientSession) -> None:
        r = await step(s, "exec", argv=["sh", "-c",
                                        "echo out=$GITWAL_KEY; echo err >&2; cat > in.txt; "
                                        "printf gen > gen.txt"], step=1)
        assert r["changed"] == ["gen.txt", "in.txt"] and r["verified"] == "exit 0"
        assert f"out={r['run']}:{r['lsn']}" in r["output"] and "err" in r["output"]
        # The command's stdin was empty, not the protocol's pipe.
        assert (repo / "in.txt").read_text() == "" and (repo / "gen.txt").read_text() == "gen"
        intent = assert_logged(repo, r, "exec")
        assert intent["args"] == {"argv": ["sh", "-c", "echo out=$GITWAL_KEY; echo err >&2; "
                                           "cat > in.txt; printf gen > gen.txt"]}
        assert intent["replay"] == "unsafe" and intent["step"] == 1
        r2 = await step(s, "exec", argv=["true"], idempotent=True)
        assert r2["changed"] == [] and by_lsn(repo)[r2["lsn"]]["replay"] == "safe"
        assert (await step(s, "status"))["committed"] == [r["lsn"], r2["lsn"]]
    ok(repo, "begin", "--run", "r", "--task", "generate")
    talk(repo, body)


def test_refusals_are_tool_errors_with_the_hint(repo: Path) -> None:
    (repo / "f.txt").write_text("a x a\n")
    ok(repo, "begin", "--run", "r", "--task", "refusals")

    async def body(s: ClientSession) -> None:
        before = len(log(repo))
        unique = "include more surrounding text so the match is unique"
        absent = "the text is not in f.txt: read the file again and copy the text exactly"
        for old, count, hint in (("zzz", 0, absent), ("a", 2, unique)):
            res = await refused(s, "replace_text", path="f.txt", old=old, new="b")
            assert f"error: replace_text: the old text occurs {count} times in f.txt" \
                in text(res)
            assert f"hint: {hint}" in text(res)
            d = data(res)
            assert d["kind"] == "ToolRefused" and d["exit_code"] == 1
            assert d["hint"].startswith(hint)
        for bad in ("../outside.txt", "/etc/passwd", ".git/config"):
            res = await refused(s, "write_file", path=bad, content="x")
            assert text(res).startswith(f"error: refused path {bad!r}")
            assert "hint: give a path relative to the top of the working tree" in text(res)
            assert data(res)["kind"] == "PathRefused"
        res = await refused(s, "move_file", src="f.txt", dst="README")
        assert "README already exists" in text(res) and "hint: delete it first" in text(res)
        res = await refused(s, "delete_file", path="missing.txt")
        assert "missing.txt does not exist" in text(res)
        res = await refused(s, "replace_symbol", path="f.txt", old="a b", new="c")
        assert "hint: use replace-text" in text(res)
        res = await refused(s, "write_file", path="x", content="!!", encoding="base64")
        assert "not valid base64" in text(res)
        res = await s.call_tool("write_file", {"path": "x", "content": "y", "step": 0})
        assert res.is_error and data(res)["kind"] == "UsageError"  # the input schema's check
        assert data(res)["exit_code"] == 2 and "step: " in data(res)["error"]
        assert len(log(repo)) == before  # a refusal logs nothing
        assert (repo / "f.txt").read_text() == "a x a\n" and not (repo / "x").exists()
    talk(repo, body)


def test_failing_checks_abort_and_restore_the_tree(repo: Path) -> None:
    (repo / "f.txt").write_text("keep\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "f")
    ok(repo, "begin", "--run", "r", "--task", "checks")
    clean = tree_of(repo)

    async def body(s: ClientSession) -> None:
        res = await refused(s, "exec",
                            argv=["sh", "-c", "echo new > gen.txt; echo more >> f.txt; "
                                  "echo ran"],
                            check="echo checking; exit 3")
        d = data(res)
        assert d["kind"] == "StepFailed" and "check failed: echo checking; exit 3" in d["error"]
        assert "hint: " in text(res) and d["hint"]
        assert sorted(d["aborted"]["restored"]) == ["f.txt", "gen.txt"]
        assert "checking" in d["aborted"]["output"] and "ran" in d["output"]
        assert tree_of(repo) == clean
        rows = by_lsn(repo)
        intent = rows[d["aborted"]["intent"]]
        assert intent["tool"] == "exec" and intent["status"] == "aborted"
        abort = rows[d["aborted"]["lsn"]]
        assert abort["type"] == "abort" and abort["reason"] == "check failed: echo checking; exit 3"
        assert sorted(abort["restored"]) == ["f.txt", "gen.txt"]

        res = await refused(s, "exec", argv=["sh", "-c", "echo x > gen.txt; exit 4"])
        assert "command exited with status 4" in text(res) and tree_of(repo) == clean

        res = await refused(s, "replace_text", path="f.txt", old="keep", new="lost",
                            check="grep -q keep f.txt")
        assert data(res)["aborted"]["restored"] == ["f.txt"]
        assert (repo / "f.txt").read_text() == "keep\n"
        assert by_lsn(repo)[data(res)["aborted"]["intent"]]["status"] == "aborted"
        assert (await step(s, "status"))["aborted"] == [2, 4, 6]
    talk(repo, body)


# -- run selection ---------------------------------------------------------------


def test_first_change_begins_a_run_with_the_server_task(repo: Path) -> None:
    async def body(s: ClientSession) -> None:
        st = await step(s, "status")
        assert st["run"] is None
        assert (await step(s, "recover"))["run"] is None
        assert (await refused(s, "checkpoint")).is_error  # nothing to checkpoint yet
        r = await step(s, "ensure_line", path="a.txt", line="x")
        assert r["began_run"] is True
        res = await s.call_tool("ensure_line", {"path": "b.txt", "line": "y"})
        assert data(res)["run"] == r["run"] and data(res)["began_run"] is False
    talk(repo, body, "--task", "tidy the repo")
    runs = json.loads(ok(repo, "runs", "--json"))
    [run] = runs
    assert run["task"] == "tidy the repo" and run["current"] and run["records"] == 5


@pytest.mark.slow
def test_run_option_pins_the_run_and_begin_switches_it(repo: Path) -> None:
    ok(repo, "begin", "--run", "pinned", "--task", "one")
    ok(repo, "begin", "--run", "other", "--task", "two")  # now the current run

    async def body(s: ClientSession) -> None:
        assert (await step(s, "ensure_line", path="a.txt", line="1"))["run"] == "pinned"
        assert (await step(s, "status"))["run"] == "pinned"
        await step(s, "begin", task="three", run_id="third")
        assert (await step(s, "ensure_line", path="a.txt", line="2"))["run"] == "third"
        res = await refused(s, "begin", task="again", run_id="third")
        assert "run third already exists" in text(res)
    talk(repo, body, "--run", "pinned")
    assert [r["tool"] for r in log(repo, "--run", "other") if r["type"] == "intent"] == []
    assert len(log(repo, "--run", "pinned")) == 3 and len(log(repo, "--run", "third")) == 3

    bad = wal(repo, "mcp", "--run", "nope")
    assert bad.returncode == 1 and "error: no run nope" in bad.stderr and "hint: " in bad.stderr


def test_without_run_option_the_server_follows_the_current_run(repo: Path) -> None:
    ok(repo, "begin", "--run", "first", "--task", "one")

    async def body(s: ClientSession) -> None:
        assert (await step(s, "ensure_line", path="a.txt", line="1"))["run"] == "first"
        ok(repo, "begin", "--run", "second", "--task", "two")  # a harness starts a new run
        assert (await step(s, "ensure_line", path="a.txt", line="2"))["run"] == "second"
    talk(repo, body)


def test_paths_are_relative_to_the_top_of_the_tree(repo: Path, tmp_path: Path) -> None:
    (repo / "sub").mkdir()

    async def body(s: ClientSession) -> None:
        r = await step(s, "ensure_line", path="top.txt", line="x")
        assert r["target"] == ["top.txt"]
        r = await step(s, "exec", argv=["sh", "-c", "pwd > where.txt"])
        assert r["changed"] == ["where.txt"]
    talk(repo / "sub", body)  # started in a subdirectory
    assert (repo / "top.txt").read_text() == "x\n" and not (repo / "sub" / "top.txt").exists()
    assert Path((repo / "where.txt").read_text().strip()).resolve() == repo.resolve()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def other(s: ClientSession) -> None:
        await step(s, "write_file", path="sub/in.txt", content="in\n")
    talk(elsewhere, other, "--repo", str(repo / "sub"))
    assert (repo / "sub" / "in.txt").read_text() == "in\n"
    assert not (elsewhere / "sub").exists()


def test_calls_run_one_step_at_a_time(repo: Path, tmp_path: Path) -> None:
    trace, ready = tmp_path / "trace", tmp_path / "ready"
    gates = {name: tmp_path / f"gate-{name}" for name in ("a", "b")}
    for fifo in (ready, *gates.values()):
        os.mkfifo(fifo)
    ok(repo, "begin", "--run", "r", "--task", "serial")

    def started() -> str:  # blocks until a command says on `ready` that it runs
        return ready.read_text().strip()

    def release(name: str) -> None:  # blocks until that command waits at its gate
        gates[name].write_text("go\n")

    async def body(s: ClientSession) -> None:
        results: list[CallToolResult] = []

        async def one(name: str) -> None:
            # The command runs until the test opens its gate.
            script = (f"echo start {name} >> {trace}; echo {name} > {ready}; "
                      f"read _ < {gates[name]}; echo out {name}; echo end {name} >> {trace}")
            res = await s.call_tool("exec", {"argv": ["sh", "-c", script]})
            assert not res.is_error, text(res)
            # Each call returns its own command's output, and only that.
            assert data(res)["output"] == f"out {name}\n"
            results.append(res)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "a")
                tg.start_soon(one, "b")
                first = await anyio.to_thread.run_sync(started, abandon_on_cancel=True)
                # A ping sent after both calls is answered once the server has read them.
                await s.send_ping()
                assert trace.read_text().splitlines() == [f"start {first}"]
                await anyio.to_thread.run_sync(release, first, abandon_on_cancel=True)
                second = await anyio.to_thread.run_sync(started, abandon_on_cancel=True)
                await anyio.to_thread.run_sync(release, second, abandon_on_cancel=True)
        assert len(results) == 2 and {first, second} == {"a", "b"}
    talk(repo, body)
    lines = trace.read_text().splitlines()
    first = lines[0].split()[1]
    second = "b" if first == "a" else "a"
    assert lines == [f"start {first}", f"end {first}", f"start {second}", f"end {second}"]


# -- status, checkpoint, recover -------------------------------------------------


def test_checkpoint_and_status_tools(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "cp")

    async def body(s: ClientSession) -> None:
        await step(s, "write_file", path="a.txt", content="a\n")
        (repo / "stray.txt").write_text("no step explains me\n")
        res = await refused(s, "checkpoint")
        assert "stray.txt" in text(res) and "include-unlogged" in data(res)["hint"]
        cp = await step(s, "checkpoint", message="first", include_unlogged=True)
        assert cp["unlogged"] == ["stray.txt"] and cp["covers"] == 2 and cp["ref"] == \
            "refs/heads/main"
        head = git(repo, "log", "-1", "--format=%H%n%B").splitlines()
        assert head[0] == cp["git"] and head[1] == "first"
        assert f"Wal-Lsn: {cp['lsn']}" in head and "Wal-Run: r" in head
        st = await step(s, "status")
        assert st["checkpoint"] == cp["lsn"] and st["committed"] == [] and st["open"] == []
        d = await step(s, "checkpoint", detached=True)
        assert d["ref"] == f"refs/wal-checkpoints/r/{d['lsn']}" and d["reused_head"]
    talk(repo, body)
    rows = log(repo)
    assert [r["type"] for r in rows][-2:] == ["checkpoint", "checkpoint"]


def test_the_undo_tool_previews_undoes_and_refuses_over_someones_edit(repo: Path) -> None:
    ok(repo, "begin", "--run", "u", "--task", "undo")

    async def body(s: ClientSession) -> None:
        await step(s, "write_file", path="a.txt", content="a\n")
        await step(s, "exec", argv=["sh", "-c", "echo b > b.txt"])
        preview = await step(s, "undo", dry_run=True)
        assert preview["lsn"] is None and preview["undoes"] == [4]
        assert "+++ /dev/null" in preview["diff"] and (repo / "b.txt").exists()
        done = await step(s, "undo")
        assert done["undoes"] == [4] and done["lsn"] == 6 and not (repo / "b.txt").exists()
        (repo / "a.txt").write_text("a person's edit\n")
        res = await refused(s, "undo")
        assert "a.txt changed since the log's last step there" in text(res)
        assert (repo / "a.txt").read_text() == "a person's edit\n"
        # An agent session's own steps, logged by its hooks in its own run.
        from .test_agent_payloads import claude_run, claude_tool, run_hook

        write = {"file_path": str(repo / "c.txt"), "content": "c\n"}
        for event in ("PreToolUse", "PostToolUse"):
            assert run_hook(repo, "claude", claude_tool(repo, event, "Write", write,
                                                        "toolu_c")).code == 0
            if event == "PreToolUse":
                (repo / "c.txt").write_text("c\n")
        theirs = await step(s, "undo", run=claude_run())
        assert theirs["run"] == claude_run() and not (repo / "c.txt").exists()
    talk(repo, body)


@pytest.mark.slow
def test_server_killed_mid_write_then_the_recover_tool(repo: Path) -> None:
    (repo / "f.txt").write_text("alpha beta\n" * 2000)
    ok(repo, "begin", "--run", "r", "--task", "crash")
    before = (repo / "f.txt").read_bytes()

    async def crash(s: ClientSession) -> None:
        with pytest.raises(MCPError, match="Connection closed"):  # died with the server
            await s.call_tool("replace_symbol", {"path": "f.txt", "old": "beta", "new": "gamma"})
    talk(repo, crash, env={"GITWAL_CRASH_AT": "mid-write"})
    assert (repo / "f.txt").read_bytes() not in (before, before.replace(b"beta", b"gamma"))

    async def body(s: ClientSession) -> None:
        st = await step(s, "status")
        assert st["open"] == [2]
        res = await refused(s, "ensure_line", path="g.txt", line="x")
        assert "still open" in text(res) and "git wal recover" in data(res)["hint"]
        r = await step(s, "recover", redo=True)
        [item] = r["intents"]
        assert item["outcome"] == "torn" and item["action"] == "redone"
        assert "do not redo" in r["prompt"] or "Committed" in r["prompt"]
        assert (repo / "f.txt").read_bytes() == before.replace(b"beta", b"gamma")
        again = await step(s, "recover")
        assert again["intents"] == [] and not again["in_doubt"]
    talk(repo, body)
    rows = by_lsn(repo)
    assert rows[2]["status"] == "committed" and rows[3]["type"] == "commit"
    assert rows[3]["recovered"] is True


@pytest.mark.slow
def test_sigkill_mid_exec_then_recover_decides(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "long command")
    ready, hold = tmp_path / "ready", tmp_path / "hold"
    os.mkfifo(ready)
    os.mkfifo(hold)  # never opened for writing: the command runs until it is killed
    script = f"echo half > half.txt; echo $PPID $$ > {ready}; exec cat {hold}"
    pids: list[int] = []

    async def body(s: ClientSession) -> None:
        failed: list[str] = []

        async def call() -> None:
            with pytest.raises(MCPError, match="Connection closed"):  # died with the server
                await s.call_tool("exec", {"argv": ["sh", "-c", script]})
            failed.append("connection closed")

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                said = await anyio.to_thread.run_sync(ready.read_text, abandon_on_cancel=True)
                pids.extend(int(p) for p in said.split())
                os.kill(pids[0], signal.SIGKILL)  # the server, mid-command
        assert failed == ["connection closed"]
    try:
        talk(repo, body)
        busy = wal(repo, "recover")
        assert busy.returncode == 1 and "still running" in busy.stderr, busy.stderr
    finally:
        if pids:
            os.kill(pids[1], signal.SIGKILL)
            wait_exit(pids[1])  # its lock goes with it
    assert by_lsn(repo)[2]["status"] == "open"

    doubt = wal(repo, "recover", "--json")
    assert doubt.returncode == 3, doubt.stderr
    [item] = json.loads(doubt.stdout)["intents"]
    assert item["outcome"] == "in-doubt" and item["changed"] == ["half.txt"]

    async def decide(s: ClientSession) -> None:
        r = await step(s, "recover", restore=True)
        [item] = r["intents"]
        assert item["action"] == "restored" and not r["in_doubt"]
        assert not (repo / "half.txt").exists()
        assert (await step(s, "status"))["aborted"] == [2]
    talk(repo, decide)
    rows = by_lsn(repo)
    assert rows[2]["status"] == "aborted" and rows[3]["type"] == "abort"
    assert rows[3]["restored"] == ["half.txt"]


# -- without the SDK ---------------------------------------------------------------


def test_without_the_sdk_mcp_fails_with_a_hint_and_the_rest_works(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "no sdk")
    # A real process in which `import mcp` fails, as where the extra is not installed.
    prelude = "import sys; sys.modules['mcp'] = None; from gitwal.cli import main; "

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", prelude + f"main({list(args)!r})"],
                              cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL)

    proc = run("mcp")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: `git wal mcp` needs the MCP SDK")
    assert "hint: pip install 'gitwal[mcp]'" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""
    status = run("status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["run"] == "r"
    entry = run("mcp-config")
    assert entry.returncode == 0 and json.loads(entry.stdout)["mcpServers"]["gitwal"]

    probe = subprocess.run(
        [sys.executable, "-c", "import sys, gitwal, gitwal.cli, gitwal.agents.mcp_entry, "
         "gitwal.mcp.host; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp'))"],
        capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"


# -- registration (.mcp.json) ------------------------------------------------------


def test_merge_and_remove_keep_foreign_servers(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    assert merge_mcp_json(path)  # created
    assert json.loads(path.read_text()) == {"mcpServers": {"gitwal": mcp_server_entry()}}
    assert mcp_server_entry() == {"command": "git-wal", "args": ["mcp"]}
    assert remove_from_mcp_json(path) and not path.exists()  # only gitwal's: deleted
    assert not remove_from_mcp_json(path)

    theirs: dict[str, Any] = {"$schema": "x", "mcpServers": {
        "db": {"command": "db-mcp", "args": ["--ro"], "env": {"TOKEN": "t"}},
        "gitwal": {"command": "old-git-wal", "env": {"GITWAL_X": "1"}},
        "web": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}
    path.write_text(json.dumps(theirs))
    os.chmod(path, 0o600)
    assert merge_mcp_json(path)
    merged = json.loads(path.read_text())
    assert list(merged) == ["$schema", "mcpServers"]
    assert list(merged["mcpServers"]) == ["db", "gitwal", "web"]
    assert merged["mcpServers"]["db"] == theirs["mcpServers"]["db"]
    assert merged["mcpServers"]["web"] == theirs["mcpServers"]["web"]
    assert merged["mcpServers"]["gitwal"] == {"command": "git-wal", "env": {"GITWAL_X": "1"},
                                              "args": ["mcp"]}
    assert path.stat().st_mode & 0o777 == 0o600
    snapshot = path.read_bytes()
    assert not merge_mcp_json(path) and path.read_bytes() == snapshot  # idempotent

    assert remove_from_mcp_json(path)
    left = json.loads(path.read_text())
    assert left == {"$schema": "x", "mcpServers": {"db": theirs["mcpServers"]["db"],
                                                   "web": theirs["mcpServers"]["web"]}}
    assert not remove_from_mcp_json(path) and json.loads(path.read_text()) == left

    # A user's own way of starting it (another path, more options) is kept as it is.
    own = {"command": "/opt/venv/bin/git-wal", "args": ["mcp", "--task", "docs"]}
    path.write_text(json.dumps({"mcpServers": {"gitwal": own}}))
    assert not merge_mcp_json(path) and json.loads(path.read_text())["mcpServers"]["gitwal"] == own


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"mcpServers": []}'])
def test_merge_refuses_a_file_it_cannot_edit(tmp_path: Path, content: str) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(content)
    for fn in (merge_mcp_json, remove_from_mcp_json):
        with pytest.raises(McpConfigError) as e:
            fn(path)
        assert "fix" in e.value.hint
    assert path.read_text() == content


@pytest.mark.slow
def test_mcp_config_command(repo: Path) -> None:
    assert json.loads(ok(repo, "mcp-config")) == {"mcpServers": {"gitwal": mcp_server_entry()}}
    (repo / "sub").mkdir()
    added = json.loads(ok(repo / "sub", "mcp-config", "--merge", "--json"))
    assert added == {"path": str(repo / ".mcp.json"), "action": "merge", "changed": True}
    assert "already present" in ok(repo, "mcp-config", "--merge")
    other = repo / "other.json"
    other.write_text('{"mcpServers": {"x": {"command": "x"}}}')
    assert "added gitwal" in ok(repo, "mcp-config", "--merge", "--file", str(other))
    assert "removed gitwal" in ok(repo, "mcp-config", "--remove", "--file", str(other))
    assert json.loads(other.read_text()) == {"mcpServers": {"x": {"command": "x"}}}
    assert "removed gitwal" in ok(repo, "mcp-config", "--remove")
    assert not (repo / ".mcp.json").exists()
    (repo / ".mcp.json").write_text("{oops")
    bad = wal(repo, "mcp-config", "--merge")
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and "hint: fix" in bad.stderr


def test_exec_cannot_decide_switch_gates_off_or_run_an_irreversible_command(repo: Path) -> None:
    """The MCP server has no approve or resolve tool, and its `exec` refuses what the
    agents' hooks refuse (gitwal/shellwords/guard.py) and `wal.irreversible` commands,
    which it cannot put to the user: nothing is logged or run."""
    git(repo, "config", "--add", "wal.irreversible", "git push*")
    ok(repo, "begin", "--run", "r", "--task", "guarded")
    before = log(repo)

    async def body(s: ClientSession) -> None:
        names = {t.name for t in (await s.list_tools()).tools}
        assert not names & {"approve", "resolve"}
        for argv in (["git", "wal", "approve", "2", "--yes"],
                     ["env", "-u", "CLAUDECODE", "git-wal", "resolve", "2", "--applied"],
                     ["git", "config", "wal.done.enforce", "false"],
                     ["sh", "-c", "echo '[wal]' >> .git/config"]):
            res = await refused(s, "exec", argv=argv)
            assert data(res)["kind"] == "ToolRefused" and "ask the user" in text(res), argv
        res = await refused(s, "exec", argv=["sh", "-c", "cd . && git push"])
        assert "irreversible here (wal.irreversible 'git push*')" in text(res)

    talk(repo, body)
    assert log(repo) == before
    assert (repo / ".git" / "config").read_text().count("[wal]") == 1  # the pattern's alone
