"""What the scripted local model servers share (fake_api.py for Claude Code,
fake_responses.py for Codex, fake_gemini.py for Gemini CLI): serving in a
background thread while in use, the requests received, the script's errors,
and waiting for a request without sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

R = TypeVar("R")


class Serving(Generic[R]):
    """A ``ThreadingHTTPServer`` (daemon threads) on 127.0.0.1, a free port, whose
    ``state`` holds ``changed``, ``requests`` and ``errors``; ``URL_PATH`` ends
    its URL."""

    URL_PATH = ""
    NAME = "fake-model"

    def __init__(self, server: type[ThreadingHTTPServer],
                 handler: type[BaseHTTPRequestHandler], state: Any) -> None:
        # Any: each module's server class types its own ``state``.
        made: Any = server(("127.0.0.1", 0), handler)
        self._server = made
        made.state = state
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.NAME,
                                        daemon=True)

    @property
    def state(self) -> Any:
        return self._server.state

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.URL_PATH}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @property
    def requests(self) -> list[R]:
        with self.state.changed:
            return list(self.state.requests)

    @property
    def errors(self) -> list[str]:
        """Exceptions raised by the script (each was answered with an error status)."""
        return list(self.state.errors)

    def wait_for(self, predicate: Callable[[list[R]], bool], timeout: float) -> bool:
        """Block until ``predicate(requests)`` holds; False on time-out."""
        st = self.state
        deadline = time.monotonic() + timeout
        with st.changed:
            while not predicate(st.requests):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                st.changed.wait(left)
        return True
