"""The scripted API's wire format, read back with a plain HTTP client (no Claude
Code needed): what the end-to-end scenarios rely on when Claude Code talks to it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from .fake_api import FakeApi, Request, Text, ToolUse

TOOLS = [{"name": "Edit", "input_schema": {"type": "object"}}]


def post(url: str, body: dict[str, Any]) -> tuple[int, str, str]:
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json",
                                          "x-claude-code-session-id": "s-1"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers["content-type"], resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["content-type"], e.read().decode()


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        name, data = chunk.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        events.append((name[7:], json.loads(data[6:])))
    return events


def test_a_tool_use_turn_streams_as_the_messages_api_does() -> None:
    def script(req: Request) -> list[Text | ToolUse]:
        assert req.user_texts() == ["go"] and req.session_id == "s-1"
        return [Text("editing"), ToolUse("Edit", {"file_path": "/x", "old_string": "a"})]

    with FakeApi(script) as api:
        status, ctype, body = post(api.url + "/v1/messages?beta=true", {
            "model": "m", "stream": True, "tools": TOOLS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}]})
        [use] = api.emitted
    assert status == 200 and ctype == "text/event-stream"
    events = sse(body)
    assert [n for n, _ in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "editing"}
    assert events[4][1]["content_block"] == {"type": "tool_use", "id": use.id, "name": "Edit",
                                             "input": {}}
    partial = "".join(e["delta"]["partial_json"] for n, e in events[5:7])
    assert json.loads(partial) == {"file_path": "/x", "old_string": "a"}
    assert events[8][1]["delta"]["stop_reason"] == "tool_use"


def test_text_turns_side_requests_and_other_endpoints() -> None:
    with FakeApi(lambda req: [Text("done")], side=lambda req: "a title") as api:
        status, ctype, body = post(api.url + "/v1/messages", {
            "model": "m", "tools": TOOLS, "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and ctype == "application/json"
        msg = json.loads(body)
        assert msg["content"] == [{"type": "text", "text": "done"}]
        assert msg["stop_reason"] == "end_turn"
        # No tools: a side request, answered with the side script's text.
        _, _, body = post(api.url + "/v1/messages", {
            "model": "m", "messages": [{"role": "user", "content": "title?"}]})
        assert json.loads(body)["content"][0]["text"] == "a title"
        status, _, body = post(api.url + "/v1/messages/count_tokens", {"messages": []})
        assert status == 200 and json.loads(body)["input_tokens"] > 0
        status, _, body = post(api.url + "/v1/files", {})
        assert status == 404 and json.loads(body)["type"] == "error"
        assert [r.is_main for r in api.requests] == [True, False, False, False]


def test_a_failing_script_answers_400_and_is_reported() -> None:
    def broken(req: Request) -> list[Text]:
        raise ValueError("no such turn")

    with FakeApi(broken) as api:
        status, _, body = post(api.url + "/v1/messages", {
            "model": "m", "stream": True, "tools": TOOLS, "messages": []})
        assert status == 400 and "no such turn" in body
        assert api.errors == ["request 0: ValueError: no such turn"]
        assert api.wait_for(lambda reqs: len(reqs) == 1, timeout=1)
        assert not api.wait_for(lambda reqs: len(reqs) == 2, timeout=0.1)


@pytest.mark.parametrize("content", ["plain", [{"type": "tool_result", "tool_use_id": "t",
                                                 "content": [{"type": "text", "text": "out"}]}]])
def test_request_text_includes_tool_results(content: Any) -> None:
    req = Request(0, "POST", "/v1/messages", {}, {
        "system": [{"type": "text", "text": "sys"}],
        "messages": [{"role": "user", "content": content}]}, 0.0)
    assert req.all_text().startswith("sys\n")
    assert ("out" if isinstance(content, list) else "plain") in req.all_text()
