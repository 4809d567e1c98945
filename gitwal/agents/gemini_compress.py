"""Is Gemini CLI about to compress its history? (its ``PreCompress`` hook)

Gemini CLI 0.61.0 fires ``PreCompress`` (trigger ``auto``) before every model
request, then compresses only when the prompt of its last reply used at least
``model.compressionThreshold`` (default 0.5) of the model's context window
(1,048,576 tokens; 256,000 for the Gemma 4 models). The payload does not say
which; the transcript it names does: every model reply is recorded there with
its ``tokens.input``. This module makes the same comparison.

Gemini also keeps the newest exchange whole: it cuts the history only before a
prompt of the user's, so with a single prompt in the session (a headless
``gemini -p`` before any resume) nothing is compressed while the model is
still calling tools; the transcript's user messages say that too.

It can be wrong both ways: a threshold set by Gemini's remote experiments is
not visible here, nor a compression retried after a failed one, nor a rewound
history; and a resumed Gemini counts afresh from its first reply, while the
transcript still shows the size of the last one before. Guessing
"yes" costs a checkpoint, guessing "no" leaves the log as durable as always
(docs/agents.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .gemini_trust import layers, setting

__all__ = ["about_to_compress"]

DEFAULT_THRESHOLD = 0.5
DEFAULT_LIMIT = 1_048_576
LIMITS = {"gemma-4-31b-it": 256_000, "gemma-4-26b-a4b-it": 256_000}
TAIL_LIMIT = 8 << 20  # bytes of transcript read back at most, looking for the last reply
HEAD_LIMIT = 32 << 20  # bytes read from the start at most, counting the user's prompts
CHUNK = 64 << 10


def last_reply(transcript: Path) -> tuple[int, str, bool] | None:
    """(tokens.input, model, whether it called tools) of the newest model reply in a
    Gemini JSONL transcript (a reply is written again once its calls ran)."""
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


def _reply(line: bytes) -> tuple[int, str, bool] | None:
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
    return count, str(obj.get("model") or ""), bool(obj.get("toolCalls"))


def prompts(transcript: Path, enough: int = 2) -> int:
    """How many prompts of the user's the transcript holds (counted up to ``enough``;
    ``enough`` too when it is too long to read): user messages that are not tool
    results. Gemini's own session context is not a message line of its own."""
    seen: set[str] = set()
    read_bytes = 0
    try:
        with transcript.open("rb") as f:
            for line in f:
                read_bytes += len(line)
                if read_bytes > HEAD_LIMIT:
                    return enough
                if b'"user"' not in line or b'"functionResponse"' in line:
                    continue
                try:
                    obj: Any = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and obj.get("type") == "user":
                    seen.add(str(obj.get("id")))
                    if len(seen) >= enough:
                        return enough
    except OSError:
        return 0
    return len(seen)


def threshold(cwd: Path, env: Mapping[str, str]) -> float:
    """``model.compressionThreshold`` as Gemini's settings layers give it."""
    value, _ = setting(layers(cwd, env), "model", "compressionThreshold")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value:
        return float(value)
    return DEFAULT_THRESHOLD


def about_to_compress(payload: Mapping[str, Any], env: Mapping[str, str] | None = None) -> bool:
    transcript, cwd = payload.get("transcript_path"), payload.get("cwd")
    if not isinstance(transcript, str) or not transcript or not isinstance(cwd, str):
        return False
    found = last_reply(Path(transcript))
    if found is None:
        return False
    tokens, model, calls = found
    limit = LIMITS.get(model, DEFAULT_LIMIT)
    if tokens < threshold(Path(cwd), os.environ if env is None else env) * limit:
        return False
    # One prompt and the model still calling tools: no earlier prompt to cut before.
    return not calls or prompts(Path(transcript)) >= 2
