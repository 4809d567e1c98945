"""Is Gemini CLI about to compress its history? (its ``PreCompress`` hook)

Gemini CLI 0.61.0 fires ``PreCompress`` (trigger ``auto``) before every model
request, then compresses only when the prompt of its last reply used at least
``model.compressionThreshold`` (default 0.5) of the model's context window
(1,048,576 tokens; 256,000 for the Gemma 4 models). The payload does not say
which; the transcript it names does: every model reply is recorded there with
its ``tokens.input``. This module makes the same comparison.

It can be wrong both ways: a threshold set by Gemini's remote experiments is
not visible here, nor a compression retried after a failed one. Guessing
"yes" costs a checkpoint, guessing "no" leaves the log as durable as always
(docs/agents.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .gemini_trust import home, read

__all__ = ["about_to_compress"]

DEFAULT_THRESHOLD = 0.5
DEFAULT_LIMIT = 1_048_576
LIMITS = {"gemma-4-31b-it": 256_000, "gemma-4-26b-a4b-it": 256_000}
TAIL_LIMIT = 8 << 20  # bytes of transcript read back at most, looking for the last reply
CHUNK = 64 << 10


def last_reply(transcript: Path) -> tuple[int, str] | None:
    """(tokens.input, model) of the newest model reply in a Gemini JSONL transcript."""
    try:
        with transcript.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            pos, tail = end, b""
            while pos > 0 and end - pos < TAIL_LIMIT:
                step = min(CHUNK, pos)
                pos -= step
                f.seek(pos)
                tail = f.read(step) + tail
                lines = tail.split(b"\n")
                # The first piece may be a line cut short, unless the file starts there.
                for line in reversed(lines if pos == 0 else lines[1:]):
                    found = _reply(line)
                    if found is not None:
                        return found
                tail = lines[0] if pos > 0 else b""
    except OSError:
        return None
    return None


def _reply(line: bytes) -> tuple[int, str] | None:
    if b'"gemini"' not in line:
        return None
    try:
        obj: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "gemini":
        return None
    tokens = obj.get("tokens")
    count = tokens.get("input") if isinstance(tokens, dict) else None
    if not isinstance(count, int):
        return None
    return count, str(obj.get("model") or "")


def threshold(cwd: Path, env: Mapping[str, str]) -> float:
    value: Any = None
    for f in (home(dict(env)) / ".gemini" / "settings.json", cwd / ".gemini" / "settings.json"):
        data, _ = read(f)
        model = data.get("model") if isinstance(data, dict) else None
        got = model.get("compressionThreshold") if isinstance(model, dict) else None
        if isinstance(got, (int, float)) and not isinstance(got, bool):
            value = got  # the project's settings win
    return float(value) if value else DEFAULT_THRESHOLD


def about_to_compress(payload: Mapping[str, Any], env: Mapping[str, str] | None = None) -> bool:
    transcript, cwd = payload.get("transcript_path"), payload.get("cwd")
    if not isinstance(transcript, str) or not transcript or not isinstance(cwd, str):
        return False
    found = last_reply(Path(transcript))
    if found is None:
        return False
    tokens, model = found
    limit = LIMITS.get(model, DEFAULT_LIMIT)
    return tokens >= threshold(Path(cwd), os.environ if env is None else env) * limit
