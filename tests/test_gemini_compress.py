"""When Gemini CLI's PreCompress means a compression (gitwal/agents/gemini_compress.py):
the last reply's prompt tokens in the transcript against threshold x context window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitwal.agents.gemini_compress import about_to_compress, last_reply


def transcript(path: Path, replies: list[tuple[int, str]], pad: int = 0) -> Path:
    lines: list[Any] = [{"sessionId": "s", "kind": "main"}]
    for tokens, model in replies:
        lines += [{"type": "user", "content": [{"text": "x" * pad}]},
                  {"type": "gemini", "content": "", "model": model,
                   "tokens": {"input": tokens, "output": 1, "total": tokens + 1}},
                  {"$set": {"lastUpdated": "now"}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def payload(tmp_path: Path, t: Path) -> dict[str, Any]:
    return {"hook_event_name": "PreCompress", "trigger": "auto", "cwd": str(tmp_path),
            "transcript_path": str(t)}


def test_the_newest_reply_is_found_across_chunks(tmp_path: Path) -> None:
    t = transcript(tmp_path / "t.jsonl", [(5, "a"), (7, "b")], pad=200_000)
    assert last_reply(t) == (7, "b")
    assert last_reply(tmp_path / "missing.jsonl") is None
    (tmp_path / "empty.jsonl").write_text("")
    assert last_reply(tmp_path / "empty.jsonl") is None


def test_compresses_at_half_the_window_by_default(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    below = transcript(tmp_path / "a.jsonl", [(600_000, "m"), (524_287, "gemini-2.5-flash")])
    at = transcript(tmp_path / "b.jsonl", [(524_288, "gemini-2.5-flash")])
    assert not about_to_compress(payload(tmp_path, below), env)
    assert about_to_compress(payload(tmp_path, at), env)
    gemma = transcript(tmp_path / "c.jsonl", [(128_000, "gemma-4-31b-it")])
    assert about_to_compress(payload(tmp_path, gemma), env)  # a 256,000-token window


def test_the_threshold_setting_counts_the_projects_last(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    env = {"HOME": str(home)}
    t = transcript(tmp_path / "t.jsonl", [(110_000, "gemini-2.5-pro")])
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"model": {"compressionThreshold": 0.1}}))
    assert about_to_compress(payload(tmp_path, t), env)
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(
        '// project\n{"model": {"compressionThreshold": 0.2}}')
    assert not about_to_compress(payload(tmp_path, t), env)


def test_no_transcript_means_no(tmp_path: Path) -> None:
    assert not about_to_compress({"cwd": str(tmp_path)}, {})
    assert not about_to_compress(payload(tmp_path, tmp_path / "nope.jsonl"), {})
