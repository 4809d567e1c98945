"""The hook client's and server's socket messages (gitwal/agents/framing.py): what
one side writes the other reads back exactly; a short or oversized frame is refused."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from gitwal.agents import framing


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        yield a, b


def send(s: socket.socket, data: bytes, close: bool = True) -> threading.Thread:
    """Write ``data`` from a thread (a frame may exceed the socket's buffer), then
    end the stream when ``close``."""
    def write() -> None:
        s.sendall(data)
        if close:
            s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=write)
    t.start()
    return t


def test_a_request_reads_back_exactly(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    cwd = os.fsdecode(b"/tmp/d\xe9j\xe0 vu")  # not UTF-8: a file-system name as bytes
    payload = bytes(range(256)) * 4096 + b"\n\n"  # 1 MiB and more, newlines included
    t = send(a, framing.request("claude", cwd, payload) + b"trailing")
    assert framing.read_request(b) == ("claude", cwd, payload)
    t.join()
    assert b.recv(100) == b"trailing"  # nothing past the frame was consumed


def test_a_reply_reads_back_exactly(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    out, err = '{"systemMessage": "é"}\n'.encode(), b""
    send(a, framing.reply(2, out, err)).join()
    assert framing.read_reply(b) == (2, out, err)


@pytest.mark.parametrize("cut", [3, 7, 12, 30])
def test_a_truncated_request_is_refused(pair: tuple[socket.socket, socket.socket],
                                        cut: int) -> None:
    a, b = pair
    frame = framing.request("codex", "/w", b'{"hook_event_name": "PreToolUse"}')
    send(a, frame[:cut]).join()
    with pytest.raises(framing.Truncated):
        framing.read_request(b)


@pytest.mark.parametrize("cut", [1, 4, 6, 8])
def test_a_truncated_reply_is_refused(pair: tuple[socket.socket, socket.socket],
                                      cut: int) -> None:
    a, b = pair
    send(a, framing.reply(0, b"out", b"err")[:cut]).join()
    with pytest.raises(framing.Truncated):
        framing.read_reply(b)


def test_an_oversized_body_is_refused_before_it_is_read(
        pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    header = b"GWAL1\nclaude\n/w\n%d\n" % (framing.MAX_BODY + 1)
    send(a, header, close=False).join()  # no body follows: reading one would hang
    with pytest.raises(framing.FrameError, match="over the limit"):
        framing.read_request(b)
    send(a, b"0\n%d\n0\n" % (framing.MAX_BODY + 1), close=False).join()
    with pytest.raises(framing.FrameError, match="over the limit"):
        framing.read_reply(b)


def test_an_oversized_header_line_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    t = send(a, b"GWAL1\n" + b"x" * (framing.MAX_LINE + 10), close=False)
    with pytest.raises(framing.FrameError, match="header line"):
        framing.read_request(b)
    t.join()


def test_oversized_frames_are_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "MAX_BODY", 10)
    with pytest.raises(framing.FrameError):
        framing.request("claude", "/w", b"x" * 11)
    with pytest.raises(framing.FrameError):
        framing.reply(0, b"x" * 6, b"y" * 5)
    assert framing.request("claude", "/w", b"x" * 10).endswith(b"\n10\n" + b"x" * 10)
    with pytest.raises(framing.FrameError):
        framing.request("claude", "/a\nb", b"")  # a cwd with a newline cannot be framed


@pytest.mark.parametrize("frame", [
    b"GWAL2\nclaude\n/w\n0\n",  # another protocol
    b"GWAL1\nclaude\n/w\n+5\nhello",  # counts are plain digits
    b"GWAL1\nclaude\n/w\n-1\n",
    b"GWAL1\nclaude\n/w\n 5\nhello",
])
def test_a_malformed_request_is_refused(pair: tuple[socket.socket, socket.socket],
                                        frame: bytes) -> None:
    a, b = pair
    send(a, frame).join()
    with pytest.raises(framing.FrameError):
        framing.read_request(b)
