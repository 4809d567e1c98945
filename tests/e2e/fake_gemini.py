"""A scripted stand-in for the Gemini API (generativelanguage), on 127.0.0.1.

Gemini CLI talks to whatever ``GOOGLE_GEMINI_BASE_URL`` names. This server
answers ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` with
server-sent events of ``GenerateContentResponse`` chunks, as the real API
does, ``:generateContent`` with one such response and ``:countTokens`` with a
rough count. The "model" is a Python callable: it sees each request that
offers tools (a turn of the agent loop) and returns the parts of its reply
(text and function calls). Requests without tools are Gemini's side requests
(next-speaker checks, summaries, routing): they get ``side(request)`` as text.

``tokens(request)`` is the prompt token count a reply reports (Gemini
compresses its history when it nears the context window). Every request is
recorded in order, and each one wakes ``wait_for``, so a test orders its
steps on what Gemini sent (never on a sleep). Standard library only; the
server runs in a daemon thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .serving import Serving


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Call:
    """A function call of the model's reply."""

    name: str
    args: Mapping[str, Any]


Part = Text | Call


@dataclass(frozen=True)
class Request:
    seq: int
    path: str
    body: Any

    @property
    def model(self) -> str:
        return self.path.split("/models/")[-1].split(":")[0] if "/models/" in self.path else ""

    @property
    def method(self) -> str:
        return self.path.split("?")[0].rsplit(":", 1)[-1]

    @property
    def is_main(self) -> bool:
        """A turn of the agent loop: a content request that offers tools."""
        return (self.method in ("streamGenerateContent", "generateContent")
                and isinstance(self.body, dict) and bool(self.body.get("tools")))

    @property
    def contents(self) -> list[dict[str, Any]]:
        if not isinstance(self.body, dict):
            return []
        return [c for c in self.body.get("contents", []) if isinstance(c, dict)]

    def parts(self, role: str | None = None) -> list[dict[str, Any]]:
        return [p for c in self.contents if role is None or c.get("role") == role
                for p in c.get("parts", []) if isinstance(p, dict)]

    def user_texts(self) -> list[str]:
        return [str(p["text"]) for p in self.parts("user") if isinstance(p.get("text"), str)]

    def function_responses(self) -> list[dict[str, Any]]:
        return [p["functionResponse"] for p in self.parts()
                if isinstance(p.get("functionResponse"), dict)]

    def all_text(self) -> str:
        system = self.body.get("systemInstruction") if isinstance(self.body, dict) else None
        texts = [json.dumps(system)] if system else []
        texts += [str(p.get("text", "")) for p in self.parts()]
        texts += [json.dumps(r) for r in self.function_responses()]
        return "\n".join(texts)


Script = Callable[[Request], Sequence[Part]]
SideScript = Callable[[Request], str]
Tokens = Callable[[Request], int]  # the prompt's token count a reply reports


def _default_side(_req: Request) -> str:
    # The next-speaker check asks for JSON; "user" ends the turn.
    return json.dumps({"reasoning": "The model answered.", "next_speaker": "user"})


def _response(parts: list[dict[str, Any]], model: str, finish: str | None,
              prompt_tokens: int = 100) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": model,
            "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 10,
                              "totalTokenCount": prompt_tokens + 10}}


@dataclass
class _State:
    script: Script
    side: SideScript
    tokens: Tokens
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(default_factory=threading.Condition)
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


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

    def _error(self, status: int, message: str) -> None:
        self._send(status, json.dumps({"error": {"code": status, "message": message,
                                                 "status": "INVALID_ARGUMENT"}}).encode())

    def do_GET(self) -> None:
        self._record(None)
        self._error(404, f"{self.path}: not served by the scripted API")

    def _record(self, body: Any) -> Request:
        st = self.server.state
        with st.changed:
            req = Request(len(st.requests), self.path, body)
            st.requests.append(req)
            st.changed.notify_all()
        return req

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        req = self._record(body)
        if req.method == "countTokens":
            self._send(200, json.dumps({"totalTokens": max(1, len(raw) // 4)}).encode())
            return
        if req.method not in ("streamGenerateContent", "generateContent"):
            self._error(404, f"{self.path}: not served by the scripted API")
            return
        st = self.server.state
        try:
            with st.lock:  # one request at a time through the script
                out: Sequence[Part] = st.script(req) if req.is_main else [Text(st.side(req))]
        except Exception as e:  # a broken script fails the test instead of hanging it
            st.errors.append(f"request {req.seq}: {type(e).__name__}: {e}")
            self._error(400, f"scripted model failed: {e}")
            return
        parts = [{"text": p.text} if isinstance(p, Text)
                 else {"functionCall": {"name": p.name, "args": dict(p.args)}} for p in out]
        if not parts:
            parts = [{"text": "Done."}]
        model = req.model or "gemini-scripted"
        tokens = st.tokens(req) if req.is_main else 100
        if req.method == "generateContent":
            self._send(200, json.dumps(_response(parts, model, "STOP", tokens)).encode())
            return
        # Streamed: each part its own chunk, the finish reason on the last, as the API does.
        chunks = [_response([p], model, "STOP" if i == len(parts) - 1 else None, tokens)
                  for i, p in enumerate(parts)]
        self._send(200, b"".join(f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks),
                   "text/event-stream")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class FakeGemini(Serving[Request]):
    """The scripted Gemini API, serving in a background thread while in use."""

    NAME = "fake-gemini"

    def __init__(self, script: Script, *, side: SideScript = _default_side,
                 tokens: Tokens = lambda _req: 100) -> None:
        super().__init__(_Server, _Handler, _State(script, side, tokens))

    @property
    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if r.is_main]


class Steps:
    """Plays a fixed list of replies, one per agent-loop turn (by how many function
    responses the request already carries), then says "Done."."""

    def __init__(self, replies: Sequence[Sequence[Part]]) -> None:
        self.replies = [list(r) for r in replies]

    def __call__(self, req: Request) -> Sequence[Part]:
        done = sum(1 for p in req.parts("model") if "functionCall" in p)
        calls = 0
        for i, reply in enumerate(self.replies):
            calls += sum(1 for p in reply if isinstance(p, Call))
            if calls > done:
                return self.replies[i]
        return [Text("Done.")]
