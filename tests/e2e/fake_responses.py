"""A scripted stand-in for the OpenAI Responses API, on 127.0.0.1.

Codex CLI talks to the ``base_url`` of the model provider its config.toml
names. This server answers ``POST /v1/responses`` with server-sent events as
the real API streams them (``response.created``, one
``response.output_item.done`` per item, ``response.completed``), but the
"model" is a Python callable: it sees each request and returns the items of
its reply (:class:`Message`, :class:`FunctionCall` such as ``exec_command``,
:class:`CustomCall` such as ``apply_patch``, whose input is the raw patch).

Every request is recorded, in order; ``signal_dir`` (if given) gets one file
``request-<n>`` per model request (n from 0), written as it arrives, before the
script answers, so a test can wait for "Codex has asked the model" on a file,
not on a clock. Any other
route gets a 404. Standard library only; the server runs in a daemon thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .serving import Serving

# -- what the scripted model says ----------------------------------------------


@dataclass(frozen=True)
class Message:
    """An assistant message (ends the turn when it is the only item)."""

    text: str


@dataclass(frozen=True)
class FunctionCall:
    """A JSON-argument tool call (``exec_command``); ``call_id`` filled in if empty."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str = ""


@dataclass(frozen=True)
class CustomCall:
    """A free-form tool call (``apply_patch`` with the patch as ``input``)."""

    name: str
    input: str
    call_id: str = ""


Item = Message | FunctionCall | CustomCall


# -- what Codex sent ----------------------------------------------------------------


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [str(c["text"]) for c in content if isinstance(c, dict)
            and isinstance(c.get("text"), str)]


@dataclass(frozen=True)
class Request:
    """One HTTP request as Codex sent it."""

    seq: int  # among every request
    method: str
    path: str
    body: Any
    n: int = -1  # among the model requests (POST .../responses), from 0

    @property
    def is_responses(self) -> bool:
        return self.method == "POST" and self.path.split("?")[0].endswith("/responses")

    @property
    def input(self) -> list[dict[str, Any]]:
        if not isinstance(self.body, dict):
            return []
        return [i for i in self.body.get("input", []) if isinstance(i, dict)]

    def user_texts(self) -> list[str]:
        """The text of every user and developer message, oldest first."""
        return ["\n".join(_texts(i.get("content"))) for i in self.input
                if i.get("type") == "message" and i.get("role") in ("user", "developer")]

    def all_text(self) -> str:
        parts = [str(self.body.get("instructions") or "")] if isinstance(self.body, dict) else []
        for i in self.input:
            parts += _texts(i.get("content"))
            if isinstance(i.get("output"), str):
                parts.append(i["output"])
        return "\n".join(parts)

    def outputs(self) -> dict[str, str]:
        """call id -> the output Codex returned for it (function and custom calls)."""
        out: dict[str, str] = {}
        for i in self.input:
            if i.get("type") in ("function_call_output", "custom_tool_call_output"):
                value = i.get("output")
                out[str(i.get("call_id"))] = value if isinstance(value, str) else json.dumps(value)
        return out

    def tool_names(self) -> list[str]:
        if not isinstance(self.body, dict):
            return []
        return [str(t.get("name")) for t in self.body.get("tools", []) if isinstance(t, dict)]


Script = Callable[[Request], Sequence[Item]]


# -- the server ----------------------------------------------------------------------


@dataclass
class _State:
    script: Script
    signal_dir: Path | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(default_factory=threading.Condition)
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    next_id: int = 0


def _sse(events: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _item(st: _State, item: Item, seq: int) -> dict[str, Any]:
    st.next_id += 1
    if isinstance(item, Message):
        return {"type": "message", "role": "assistant", "id": f"msg_{seq}_{st.next_id}",
                "content": [{"type": "output_text", "text": item.text}]}
    call_id = item.call_id or f"call_e2e_{st.next_id:05d}"
    if isinstance(item, FunctionCall):
        return {"type": "function_call", "call_id": call_id, "name": item.name,
                "arguments": json.dumps(dict(item.arguments))}
    return {"type": "custom_tool_call", "call_id": call_id, "name": item.name,
            "input": item.input}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self, body: Any) -> Request:
        st = self.server.state
        with st.changed:
            req = Request(len(st.requests), self.command, self.path, body)
            if req.is_responses:
                n = sum(r.is_responses for r in st.requests)
                req = Request(req.seq, req.method, req.path, body, n)
                if st.signal_dir is not None:
                    # Before the script runs: "Codex is waiting for model request n".
                    (st.signal_dir / f"request-{n}").write_text(json.dumps(body))
            st.requests.append(req)
            st.changed.notify_all()
        return req

    def do_GET(self) -> None:
        self._record(None)
        self._send(404, b'{"error": {"message": "not served by the scripted API"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        req = self._record(body)
        if not req.is_responses or not isinstance(body, dict):
            self._send(404, b'{"error": {"message": "not served by the scripted API"}}')
            return
        st = self.server.state
        try:
            with st.lock:  # one request at a time through the script: a stateful player
                items = [_item(st, i, req.seq) for i in st.script(req)]
        except Exception as e:  # a broken script fails the test, not a hang
            st.errors.append(f"request {req.seq}: {type(e).__name__}: {e}")
            self._send(400, json.dumps({"error": {"message": f"script failed: {e}"}}).encode())
            return
        if not items:
            items = [_item(st, Message("Done."), req.seq)]
        rid = f"resp_e2e_{req.seq:05d}"
        events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": rid}}]
        events += [{"type": "response.output_item.done", "item": i} for i in items]
        events.append({"type": "response.completed", "response": {
            "id": rid, "usage": {"input_tokens": 100, "input_tokens_details": None,
                                 "output_tokens": 10, "output_tokens_details": None,
                                 "total_tokens": 110}}})
        self._send(200, _sse(events), "text/event-stream")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class FakeResponses(Serving[Request]):
    """The scripted Responses API, serving in a background thread while in use."""

    NAME = "fake-responses"
    URL_PATH = "/v1"

    def __init__(self, script: Script, *, signal_dir: Path | None = None) -> None:
        super().__init__(_Server, _Handler, _State(script, signal_dir))

    @property
    def model_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_responses]
