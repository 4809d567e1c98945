"""A file that may come with a clone, as text, JSON or TOML: bounded in depth.

Python's json module recurses once per nesting level, so ``[[[[...]]]]``
100,000 levels deep raises RecursionError (a traceback, not an error a person
can act on), and so would everything that walks the result afterwards
(``json.dumps``, tomlkit's ``unwrap``). Before any parse, :func:`depth` counts
the brackets outside strings (and, for TOML, comments) and refuses past
:data:`MAX_DEPTH`; a settings file gitwal reads nests a few levels. tomlkit
refuses keys nested past 100 levels itself. Every failure is an
``error:``/``hint:`` (:class:`UnsafeFile` unless the caller names its own
error for an unparseable file), never a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..base.errors import WalError
from .files import UnsafeFile

MAX_DEPTH = 64  # levels of arrays and objects (tables): settings need a handful

# Strings (whose brackets do not count), then brackets. Written without
# nested repetition, so an unclosed string costs one pass, not a quadratic one.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
_TOML_TOKENS = re.compile(
    r'"""[\s\S]*?(?:"""|$(?![\s\S]))|\'\'\'[\s\S]*?(?:\'\'\'|$(?![\s\S]))'
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|\'[^\'\n]*\'?|#[^\n]*|[\[\]{}]')

_DEPTH_HINT = (f"gitwal reads settings nested at most {MAX_DEPTH} levels deep; fix the file "
               "by hand, then run the command again")


def text(data: bytes, path: Path) -> str:
    """``data`` (the bytes of ``path``) as UTF-8 text, or an error naming the
    first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UnsafeFile(f"{path} is not UTF-8 text: byte 0x{data[e.start]:02x} at offset "
                         f"{e.start} (line {line}) cannot be decoded",
                         "JSON and TOML settings files are UTF-8: save it as UTF-8 (or "
                         "remove that byte), then run the command again") from None


def depth(source: str, toml: bool = False) -> int:
    """How deep the arrays and objects of ``source`` nest, counted up to one past
    :data:`MAX_DEPTH` (the scan stops there)."""
    level = deepest = 0
    for m in (_TOML_TOKENS if toml else _JSON_TOKENS).finditer(source):
        ch = m.group()
        if ch in "[{":
            level += 1
            if level > deepest:
                deepest = level
                if deepest > MAX_DEPTH:
                    break
        elif ch in "]}":
            level = max(0, level - 1)
    return deepest


def _check_depth(source: str, path: Path, toml: bool) -> None:
    if depth(source, toml) > MAX_DEPTH:
        raise UnsafeFile(f"{path} nests more than {MAX_DEPTH} levels deep", _DEPTH_HINT)


def load_json(source: str, path: Path, kind: str = "JSON",
              error: type[WalError] = UnsafeFile,
              hint: str = "fix the file by hand, then run the command again") -> Any:
    """``source`` (the text of ``path``, comments already blanked out for JSON
    with comments) parsed; ``error`` with ``hint`` when it is not ``kind``."""
    _check_depth(source, path, toml=False)
    try:
        return json.loads(source)
    except RecursionError:  # not reached below MAX_DEPTH; kept as a guard
        raise UnsafeFile(f"{path} nests too deep to read", _DEPTH_HINT) from None
    except ValueError as e:
        raise error(f"{path} is not valid {kind} ({e})", hint) from None


def load_toml(source: str, path: Path, error: type[WalError] = UnsafeFile,
              hint: str = "fix the file by hand, then run the command again") -> Any:
    """``source`` (the text of ``path``) as a tomlkit document (comments and
    layout kept for an edit); ``error`` with ``hint`` when it is not TOML."""
    import tomlkit  # only here: the rest of gitwal has no use for it
    from tomlkit.exceptions import TOMLKitError

    _check_depth(source, path, toml=True)
    try:
        return tomlkit.parse(source)
    except RecursionError:
        raise UnsafeFile(f"{path} nests too deep to read", _DEPTH_HINT) from None
    except TOMLKitError as e:
        raise error(f"{path} is not valid TOML: {e}", hint) from None


__all__ = ["MAX_DEPTH", "depth", "load_json", "load_toml", "text"]
