"""`git wal mcp` follows MCP's conventions: every tool declares an outputSchema
cut from docs/json-schema (and its results, refusals included, match it), bad
arguments are gitwal errors, the hints say what each tool does, and the resume
prompt and each run's status and log are served as a prompt and resources.
The real server process, driven by the SDK's own client over stdio."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs: a test dependency only
import pytest
from mcp import ClientSession, MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, TextResourceContents

from gitwal.mcp import schemas
from gitwal.mcp.output_schemas import DEFS

from .conftest import ok, wal
from .test_mcp import data, log, talk, text

DOCS: dict[str, Any] = json.loads(schemas.SOURCE.read_text())["$defs"]

# (read_only, destructive, idempotent, open_world) per tool: docs/mcp.md, "Tools".
HINTS = {
    "write_file": (False, True, True, False),
    "replace_symbol": (False, True, True, False),
    "replace_text": (False, True, False, False),
    "ensure_line": (False, False, True, False),
    "delete_file": (False, True, True, False),
    "move_file": (False, True, True, False),
    "exec": (False, True, False, True),
    "begin": (False, False, False, False),
    "status": (True, False, True, False),
    "recover": (False, True, True, True),
    "checkpoint": (False, False, False, False),
    "undo": (False, True, False, False),
}


def conforms(document: Any, schema: dict[str, Any]) -> list[str]:
    """What is wrong with ``document`` under ``schema`` (2020-12), if anything."""
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(document)]


class Checked:
    """Calls tools and checks every result against the outputSchema the server
    listed, refusals too: the SDK's client validates only results without
    isError, other clients validate every structuredContent."""

    def __init__(self, session: ClientSession, schemas_: dict[str, dict[str, Any]]) -> None:
        self.s, self.schemas = session, schemas_

    @classmethod
    async def listing(cls, s: ClientSession) -> Checked:
        tools = (await s.list_tools()).tools
        return cls(s, {t.name: t.output_schema for t in tools if t.output_schema})

    async def call(self, tool: str, error: bool = False, **args: Any) -> dict[str, Any]:
        res = await self.s.call_tool(tool, args)
        assert res.is_error is error, text(res)
        found = data(res)
        assert not conforms(found, self.schemas[tool]), (tool, found)
        return found


# -- the schemas -------------------------------------------------------------------


def test_the_shipped_schemas_are_cut_from_the_documents_schema() -> None:
    # One source: the generated module is exactly what the schema file gives.
    assert schemas.GENERATED.read_text() == schemas.expected()
    assert schemas.main(["--check"]) == 0
    for name, entry in DEFS.items():
        assert entry == DOCS[name], name
    # An MCP document is its CLI document plus what the server adds.
    for mcp, cli in (("mcp_step", "step"), ("mcp_recover", "recover"),
                     ("mcp_checkpoint", "checkpoint_result"), ("mcp_error", "error")):
        assert set(DOCS[cli]["properties"]) <= set(DOCS[mcp]["properties"]), mcp
        assert set(DOCS[cli]["required"]) <= set(DOCS[mcp]["required"]), mcp
    assert set(schemas.TOOL_DOCUMENTS) == set(HINTS)


def test_a_stale_copy_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "output_schemas.py"
    stale.write_text(schemas.expected().replace("'minimum': 1", "'minimum': 0", 1))
    monkeypatch.setattr(schemas, "GENERATED", stale)
    assert schemas.main(["--check"]) == 1


# -- tools: schemas, hints, validation ---------------------------------------------


def test_every_tool_lists_its_output_schema_and_hints(repo: Path) -> None:
    async def body(s: ClientSession) -> None:
        caps = s.server_capabilities
        assert caps is not None and caps.tools and caps.prompts and caps.resources
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == set(HINTS)
        for name, t in tools.items():
            assert t.output_schema == schemas.output_schema(name), name
            assert "$schema" not in t.output_schema
            jsonschema.Draft202012Validator.check_schema(t.output_schema)
            jsonschema.Draft7Validator.check_schema(t.output_schema)  # older validators too
            a = t.annotations
            assert a is not None and a.title == t.title, name
            assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint,
                    a.open_world_hint) == HINTS[name], name
        status = tools["status"].output_schema or {}
        assert [r["$ref"] for r in status["anyOf"]] == [
            "#/$defs/status", "#/$defs/mcp_no_run", "#/$defs/mcp_error"]
    talk(repo, body)


def test_the_client_validates_results_against_the_schema(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "validate")

    async def body(s: ClientSession) -> None:
        await s.list_tools()
        good = await s.call_tool("status", {})  # validated by call_tool itself
        assert not good.is_error and data(good)["run"] == "r"
        await s.validate_tool_result("status", good)
        # The same check on documents that break the schema fails.
        for wrong in ({**data(good), "extra": 1}, {**data(good), "open": ["2"]}, {"run": 1}):
            bad = CallToolResult(content=[], structured_content=wrong)
            with pytest.raises(RuntimeError, match="Invalid structured content"):
                await s.validate_tool_result("status", bad)
        with pytest.raises(RuntimeError, match="did not return structured content"):
            await s.validate_tool_result("begin", CallToolResult(content=[]))
    talk(repo, body)


def test_every_result_matches_the_listed_schema_refusals_included(repo: Path) -> None:
    (repo / "f.txt").write_text("a x a\n")

    async def body(s: ClientSession) -> None:
        c = await Checked.listing(s)
        assert (await c.call("status")) == {"run": None}
        assert (await c.call("recover")) == {"run": None}
        await c.call("checkpoint", error=True)  # no run yet
        began = await c.call("begin", task="t", steps=["one"], run_id="r")
        assert began == {"run": "r", "ref": "refs/wal/r", "task": "t", "steps": ["one"]}
        w = await c.call("write_file", path="a.txt", content="a\n", step=1)
        assert w["pre"] == ["absent"] and w["changed"] == ["a.txt"]
        await c.call("ensure_line", path="a.txt", line="b")
        await c.call("replace_symbol", path="f.txt", old="x", new="y")
        await c.call("replace_text", path="f.txt", old="a", new="b", error=True)
        await c.call("move_file", src="a.txt", dst="b.txt")
        await c.call("delete_file", path="b.txt")
        e = await c.call("exec", argv=["sh", "-c", "echo out; echo g > g.txt"])
        assert e["output"] == "out\n" and e["changed"] == ["g.txt"]
        failed = await c.call("exec", argv=["sh", "-c", "echo h > h.txt; echo no"],
                              check="exit 1", error=True)
        assert failed["kind"] == "StepFailed" and failed["aborted"]["restored"] == ["h.txt"]
        await c.call("write_file", path="../out.txt", content="x", error=True)
        (repo / "stray.txt").write_text("no step explains me\n")
        await c.call("checkpoint", error=True)
        cp = await c.call("checkpoint", include_unlogged=True)
        assert cp["run"] == "r" and cp["unlogged"] == ["stray.txt"]
        st = await c.call("status")
        assert st["checkpoint"] == cp["lsn"]
        assert st == json.loads(ok(repo, "status", "--run", "r", "--json"))
        assert (await c.call("recover"))["intents"] == []
    talk(repo, body)
    assert not (repo.parent / "out.txt").exists() and not (repo / "h.txt").exists()


def test_bad_arguments_are_usage_errors(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "bad arguments")

    async def body(s: ClientSession) -> None:
        c = await Checked.listing(s)
        before = log(repo)
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("write_file", {"content": "x"}, "path: Field required"),
            ("ensure_line", {"path": ["a"], "line": "x"}, "path: Input should be a valid string"),
            ("write_file", {"path": "x", "content": "y", "step": 0}, "step: Input should be"),
            ("exec", {"argv": []}, "argv: List should have at least 1 item"),
            ("write_file", {"path": "x", "content": "y", "encoding": "latin-1"},
             "encoding: Input should be 'utf-8' or 'base64'"),
        ]
        for tool, args, problem in cases:
            res = await s.call_tool(tool, args)
            assert res.is_error
            d = data(res)
            assert not conforms(d, c.schemas[tool]), d
            assert (d["kind"], d["exit_code"]) == ("UsageError", 2)
            assert d["error"].startswith(f"{tool}: invalid arguments: ") and problem in d["error"]
            assert text(res) == f"error: {d['error']}\nhint: {d['hint']}"
        d = data(await s.call_tool("write_file", {"content": "x"}))
        assert d["hint"] == ("write_file requires path, content; it accepts check, content, "
                             "encoding, path, step")
        unknown = await s.call_tool("rm_rf", {"path": "."})
        assert unknown.is_error and data(unknown)["kind"] == "UsageError"
        assert data(unknown)["error"] == "unknown tool 'rm_rf'"
        assert "write_file" in data(unknown)["hint"]
        assert log(repo) == before and not (repo / "x").exists()
    talk(repo, body)


# -- the resume prompt ---------------------------------------------------------------


def test_the_resume_prompt_after_a_crash_names_the_open_intent(repo: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "crash", "--step", "write a")
    crashed = wal(repo, "apply", "--step", "1", "write-file", "a.txt", input=b"a\n",
                  env={"GITWAL_CRASH_AT": "after-intent"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    printed = ok(repo, "prompt")
    assert "LSN 2" in printed and "a.txt" in printed
    before = log(repo)

    async def body(s: ClientSession) -> None:
        [prompt] = (await s.list_prompts()).prompts
        assert prompt.name == "resume" and "decides nothing" in (prompt.description or "")
        assert [(a.name, a.required) for a in prompt.arguments or []] == [("run", False)]
        for args in (None, {"run": "r"}):
            got = await s.get_prompt("resume", args)
            [message] = got.messages
            assert message.role == "user" and isinstance(message.content, TextContent)
            assert message.content.text == printed.rstrip("\n")
        with pytest.raises(MCPError) as e:
            await s.get_prompt("resume", {"run": "nope"})
        assert e.value.code == INVALID_PARAMS and e.value.message.startswith("error: no run nope")
        assert e.value.data["kind"] == "UnknownRun"
        # Reading the prompt decided nothing: the intent is still open.
        assert (await s.call_tool("status", {})).structured_content["open"] == [2]
    talk(repo, body)
    assert log(repo) == before and not (repo / "a.txt").exists()


# -- resources -------------------------------------------------------------------------


def test_each_runs_status_and_log_are_resources(repo: Path) -> None:
    ok(repo, "begin", "--run", "r1", "--task", "one")
    ok(repo, "apply", "write-file", "a.txt", input=b"a\n")
    ok(repo, "begin", "--run", "r2", "--task", "two")

    async def body(s: ClientSession) -> None:
        listed = {str(r.uri): r for r in (await s.list_resources()).resources}
        assert set(listed) == {f"gitwal://run/{r}/{what}" for r in ("r1", "r2")
                               for what in ("status", "log")}
        assert listed["gitwal://run/r1/status"].mime_type == "application/json"
        assert listed["gitwal://run/r1/log"].mime_type == "application/jsonl"
        templates = (await s.list_resource_templates()).resource_templates
        assert sorted(t.uri_template for t in templates) == [
            "gitwal://run/{run}/log", "gitwal://run/{run}/status"]
        for run in ("r1", "r2"):
            for what, args in (("status", ["status", "--json"]), ("log", ["log", "--json"])):
                [content] = (await s.read_resource(f"gitwal://run/{run}/{what}")).contents
                assert isinstance(content, TextResourceContents)
                assert content.text == ok(repo, *args, "--run", run), (run, what)
        # A run begun while the server runs is listed at the next request.
        ok(repo, "begin", "--run", "r3", "--task", "three")
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        assert "gitwal://run/r3/log" in uris
        for uri in ("gitwal://run/nope/status", "gitwal://run/nope/log"):
            with pytest.raises(MCPError) as e:
                await s.read_resource(uri)
            assert e.value.code == INVALID_PARAMS and e.value.data["kind"] == "UnknownRun"
        with pytest.raises(MCPError):
            await s.read_resource("gitwal://run/..%2F..%2Fetc/status")
    talk(repo, body)
    status = json.loads(ok(repo, "status", "--run", "r1", "--json"))
    assert status["committed"] == [2]
