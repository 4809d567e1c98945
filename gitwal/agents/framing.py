"""The messages of the hook client and the hook server on their Unix socket.

Stdlib only, and cheap to import: the client (client.py) imports it as a
file next to itself (``python -S -E``, no gitwal package on the path), and
the Claude Code plugin's copy of the client has it inlined
(plugin_client.py). Both sides of the socket use only this module.

One request per connection::

    GWAL1\\n<agent>\\n<cwd>\\n<n>\\n      then n payload bytes

and one reply::

    <exit code>\\n<n_out>\\n<n_err>\\n   then the stdout and stderr bytes

Header lines hold no newline (the agent name and the working directory are
UTF-8 / file-system bytes); counts are ASCII decimal digits. A frame with a
line longer than :data:`MAX_LINE` or a body larger than :data:`MAX_BODY` is
refused (:class:`FrameError`) before anything is allocated for it; one that
ends early raises :class:`Truncated`. Either way the client runs the hook in
a process of its own.
"""

from __future__ import annotations

import _socket  # the C module (see client.py): sockets of both sides are its subclass
import os

MAGIC = b"GWAL1"
MAX_LINE = 8192  # bytes of one header line: a cwd (PATH_MAX is 4096) and then some
MAX_BODY = 256 << 20  # bytes of a payload, or of a reply's stdout and stderr together
_COUNT_DIGITS = 10  # a count of at most MAX_BODY needs fewer


class FrameError(ValueError):
    """Bytes on the socket that are not a frame of this protocol (or too large)."""


class Truncated(ConnectionError):
    """The peer closed the connection before the frame was whole."""


# -- encoding ---------------------------------------------------------------------------


def _field(value: bytes, what: str) -> bytes:
    if b"\n" in value or len(value) >= MAX_LINE:
        raise FrameError(f"the {what} cannot be framed (a newline, or over {MAX_LINE} bytes)")
    return value + b"\n"


def request(agent: str, cwd: str, payload: bytes) -> bytes:
    """The request for one hook call of ``agent`` run in ``cwd``."""
    if len(payload) > MAX_BODY:
        raise FrameError(f"the hook input is over {MAX_BODY} bytes")
    return (MAGIC + b"\n" + _field(agent.encode(), "agent name")
            + _field(os.fsencode(cwd), "working directory") + b"%d\n" % len(payload)
            + payload)


def reply(code: int, out: bytes, err: bytes) -> bytes:
    """The reply: the hook's exit code, stdout and stderr."""
    if not 0 <= code <= 255:
        raise FrameError(f"exit code {code} is not one a process can have")
    if len(out) + len(err) > MAX_BODY:
        raise FrameError(f"the hook's output is over {MAX_BODY} bytes")
    return b"%d\n%d\n%d\n" % (code, len(out), len(err)) + out + err


# -- decoding ---------------------------------------------------------------------------


def read_request(s: _socket.socket) -> tuple[str, str, bytes]:
    """(agent, cwd, payload) of the request on ``s``."""
    if _line(s) != MAGIC:
        raise FrameError("not a gitwal hook request")
    agent = _line(s).decode()
    cwd = os.fsdecode(_line(s))
    n = _count(s, MAX_BODY)
    return agent, cwd, _exact(s, n)


def read_reply(s: _socket.socket) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, stderr) of the reply on ``s``."""
    code = _count(s, 255)
    n_out = _count(s, MAX_BODY)
    n_err = _count(s, MAX_BODY - n_out)
    return code, _exact(s, n_out), _exact(s, n_err)


def _line(s: _socket.socket) -> bytes:
    """One header line, without its newline (byte by byte: nothing past it is read)."""
    buf = bytearray()
    while not buf.endswith(b"\n"):
        if len(buf) > MAX_LINE:
            raise FrameError(f"a header line is over {MAX_LINE} bytes")
        chunk = s.recv(1)
        if not chunk:
            raise Truncated("the peer closed the connection within a header")
        buf += chunk
    return bytes(buf[:-1])


def _count(s: _socket.socket, limit: int) -> int:
    text = _line(s)
    if not text.isdigit() or len(text) > _COUNT_DIGITS:  # bytes.isdigit(): ASCII only
        raise FrameError(f"expected a count, found {text[:20]!r}")
    n = int(text)
    if n > limit:
        raise FrameError(f"a count of {n} is over the limit of {limit}")
    return n


def _exact(s: _socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise Truncated(f"the peer closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)
