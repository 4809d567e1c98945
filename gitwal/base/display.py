"""Text for a terminal: any path or string from a tree or a log, printed safely.

File names are bytes. Python carries undecodable ones as lone surrogates
(``surrogateescape``), which a UTF-8 stream refuses to encode, and a name may
hold a newline or an escape sequence that would forge output lines or drive
the terminal. :func:`safe` keeps every printable character and writes the
rest as backslash escapes, so one name always prints as one line's worth of
visible text.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    if ch in _NAMED:
        return _NAMED[ch]
    if o < 0x20 or o == 0x7F:
        return f"\\x{o:02x}"
    if 0x80 <= o <= 0x9F or 0xD800 <= o <= 0xDFFF or o in (0x2028, 0x2029) \
            or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069:
        return f"\\u{o:04x}"  # C1 controls, other surrogates, line separators, bidi
    return ch


def safe(text: str) -> str:
    """``text`` with undecodable bytes as ``\\xNN`` and control characters escaped."""
    if text.isprintable() and text.isascii():
        return text
    return "".join(_escape(ch) for ch in text)
