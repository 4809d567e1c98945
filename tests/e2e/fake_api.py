"""A scripted stand-in for the Anthropic Messages API, on 127.0.0.1.

Claude Code talks to whatever ``ANTHROPIC_BASE_URL`` names. This server answers
``POST /v1/messages`` the way the real API does (streamed server-sent events,
or one JSON message when the request does not ask for a stream), but the
"model" is a Python callable: it sees each request and returns the content
blocks of its reply (text and ``tool_use`` blocks). A reply holding a tool use
ends with ``stop_reason: tool_use``, any other with ``end_turn``.

Requests without ``tools`` are Claude Code's side requests (titles, summaries,
classifiers): they get plain text. ``/v1/messages/count_tokens`` gets a rough
count; any other endpoint gets a 404 in the API's error shape. Every request is
recorded, in order, for assertions (and appended to a JSONL file if asked).

Standard library only; the server runs in a daemon thread of the caller.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .serving import Serving

# -- what the scripted model says ----------------------------------------------


@dataclass(frozen=True)
class Text:
    """A text block of the model's reply."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool call of the model's reply. ``id`` is filled in by the server."""

    name: str
    input: Mapping[str, Any]
    id: str = ""


Block = Text | ToolUse


# -- what Claude Code sent -----------------------------------------------------


def _block_texts(content: Any) -> Iterator[str]:
    """Every text string inside a message's content (tool results included)."""
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            yield block["text"]
        if block.get("type") == "tool_result":
            yield from _block_texts(block.get("content"))


@dataclass(frozen=True)
class Request:
    """One HTTP request as Claude Code sent it."""

    seq: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    at: float

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.split("?")[0] == "/v1/messages"

    @property
    def is_main(self) -> bool:
        """A turn of the agent loop: a Messages request that offers tools."""
        return self.is_messages and isinstance(self.body, dict) and bool(self.body.get("tools"))

    @property
    def session_id(self) -> str:
        return next((v for k, v in self.headers.items()
                     if k.lower() == "x-claude-code-session-id"), "")

    @property
    def messages(self) -> list[dict[str, Any]]:
        if not isinstance(self.body, dict):
            return []
        return [m for m in self.body.get("messages", []) if isinstance(m, dict)]

    def system_text(self) -> str:
        if not isinstance(self.body, dict):
            return ""
        return "\n".join(_block_texts(self.body.get("system")))

    def user_texts(self) -> list[str]:
        """Text of every user message, oldest first (tool results included)."""
        return ["\n".join(_block_texts(m.get("content")))
                for m in self.messages if m.get("role") == "user"]

    def all_text(self) -> str:
        """System prompt and every message's text, for substring searches."""
        parts = [self.system_text()]
        for m in self.messages:
            parts.extend(_block_texts(m.get("content")))
        return "\n".join(parts)

    def tool_uses(self) -> list[dict[str, Any]]:
        """The ``tool_use`` blocks of the assistant messages in this request."""
        return [b for m in self.messages if m.get("role") == "assistant"
                and isinstance(m.get("content"), list)
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the user messages in this request."""
        return [b for m in self.messages if m.get("role") == "user"
                and isinstance(m.get("content"), list)
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "method": self.method, "path": self.path,
                "headers": dict(self.headers), "body": self.body, "at": self.at}


Script = Callable[[Request], Sequence[Block]]
SideScript = Callable[[Request], str]


def _default_side(_req: Request) -> str:
    return "Scripted session"


# -- the server ----------------------------------------------------------------


@dataclass
class _State:
    script: Script
    side: SideScript
    log_path: Path | None
    latency: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(default_factory=threading.Condition)
    requests: list[Request] = field(default_factory=list)
    emitted: list[ToolUse] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    next_id: int = 0


def _sse(events: Sequence[tuple[str, Mapping[str, Any]]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    for name, data in events)


def _message(msg_id: str, model: str, content: list[dict[str, Any]], stop: str,
             out_tokens: int) -> dict[str, Any]:
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": out_tokens,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def _stream_events(msg_id: str, model: str, content: list[dict[str, Any]],
                   stop: str) -> list[tuple[str, Mapping[str, Any]]]:
    start = _message(msg_id, model, [], stop, 1)
    start["stop_reason"] = None
    events: list[tuple[str, Mapping[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(content):
        if block["type"] == "text":
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "text_delta",
                                                   "text": block["text"]}}),
            ]
        else:
            raw = json.dumps(block["input"])
            # The input arrives in pieces, as the real API sends it.
            cut = len(raw) // 2
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {**block, "input": {}}}),
                ("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "input_json_delta",
                                                   "partial_json": raw[:cut]}}),
                ("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "input_json_delta",
                                                   "partial_json": raw[cut:]}}),
            ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 10 * max(1, len(content))}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record; stderr stays quiet

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.send_header("request-id", f"req_e2e_{time.monotonic_ns()}")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, json.dumps({"type": "error",
                                       "error": {"type": kind, "message": message}}).encode())

    def _record(self, body: Any) -> Request:
        st = self.server.state
        with st.changed:
            req = Request(len(st.requests), self.command, self.path,
                          dict(self.headers.items()), body, time.time())
            st.requests.append(req)
            if st.log_path is not None:
                with st.log_path.open("a") as f:
                    f.write(json.dumps(req.to_json()) + "\n")
            st.changed.notify_all()
        return req

    def do_GET(self) -> None:
        self._record(None)
        self._error(404, "not_found_error", f"{self.path}: not served by the scripted API")

    do_HEAD = do_GET

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        req = self._record(body)
        route = self.path.split("?")[0]
        if route == "/v1/messages/count_tokens":
            self._send(200, json.dumps({"input_tokens": max(1, len(raw) // 4)}).encode())
        elif route == "/v1/messages" and isinstance(body, dict):
            self._messages(req, body)
        else:
            self._error(404, "not_found_error", f"{self.path}: not served by the scripted API")

    def _messages(self, req: Request, body: dict[str, Any]) -> None:
        st = self.server.state
        try:
            # One request at a time through the script: it is a stateful player.
            with st.lock:
                if req.is_main:
                    blocks: Sequence[Block] = st.script(req)
                else:
                    blocks = [Text(st.side(req))]
                content: list[dict[str, Any]] = []
                for b in blocks:
                    if isinstance(b, Text):
                        content.append({"type": "text", "text": b.text})
                    else:
                        st.next_id += 1
                        use = ToolUse(b.name, dict(b.input), b.id or f"toolu_e2e_{st.next_id:05d}")
                        st.emitted.append(use)
                        content.append({"type": "tool_use", "id": use.id, "name": use.name,
                                        "input": dict(use.input)})
        except Exception as e:  # a broken script must fail the test, not hang claude
            st.errors.append(f"request {req.seq}: {type(e).__name__}: {e}")
            # 400 is not retried by the client, so the session ends at once.
            self._error(400, "invalid_request_error", f"scripted model failed: {e}")
            return
        if not content:
            content = [{"type": "text", "text": "Done."}]
        stop = "tool_use" if any(c["type"] == "tool_use" for c in content) else "end_turn"
        if req.is_main and st.latency > 0:
            time.sleep(st.latency)  # a model's thinking time, outside the script's lock
        msg_id = f"msg_e2e_{req.seq:05d}"
        model = str(body.get("model", "claude-scripted"))
        if body.get("stream"):
            self._send(200, _sse(_stream_events(msg_id, model, content, stop)),
                       "text/event-stream")
        else:
            self._send(200, json.dumps(_message(msg_id, model, content, stop, 10)).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class FakeApi(Serving[Request]):
    """The scripted API, serving in a background thread while in use.

    ``latency`` delays every agent-loop reply by that many seconds (a model's
    time to answer); side requests are answered at once.

    >>> with FakeApi(lambda req: [Text("hi")]) as api:
    ...     env = {"ANTHROPIC_BASE_URL": api.url}
    """

    NAME = "fake-api"

    def __init__(self, script: Script, *, side: SideScript = _default_side,
                 log_path: Path | None = None, latency: float = 0.0) -> None:
        super().__init__(_Server, _Handler, _State(script, side, log_path, latency))

    @property
    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_main]

    @property
    def emitted(self) -> list[ToolUse]:
        """Every tool use the scripted model sent, with the id it was given."""
        with self.state.lock:
            return list(self.state.emitted)
