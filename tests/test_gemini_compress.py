"""When Gemini CLI's PreCompress means a compression (gitwal/agents/gemini_compress.py):
the last reply's prompt tokens in the transcript against threshold x context window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitwal.agents.gemini_compress import about_to_compress, last_reply, prompts


def transcript(path: Path, replies: list[tuple[int, str]], pad: int = 0,
               prompts: int = 2, calls: bool = True) -> Path:
    """A Gemini JSONL transcript: ``prompts`` prompts, then each reply (a tool call,
    written once before and once after it ran, then its result)."""
    lines: list[Any] = [{"sessionId": "s", "kind": "main"},
                        {"$set": {"messages": [{"id": "ctx", "type": "user",
                                                "content": [{"text": "<session_context>"}]}]}}]
    lines += [{"id": f"p{i}", "type": "user", "content": [{"text": "do it"}]}
              for i in range(prompts)]
    for n, (tokens, model) in enumerate(replies):
        reply = {"id": f"r{n}", "type": "gemini", "content": "", "model": model,
                 "tokens": {"input": tokens, "output": 1, "total": tokens + 1}}
        lines += [reply, {"$set": {"lastUpdated": "now"}}]
        if calls:
            lines += [{**reply, "toolCalls": [{"id": f"c{n}", "name": "write_file"}]},
                      {"id": f"u{n}", "type": "user", "content": [
                          {"functionResponse": {"id": f"c{n}", "response": {
                              "output": "x" * pad}}}]}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def payload(tmp_path: Path, t: Path) -> dict[str, Any]:
    return {"hook_event_name": "PreCompress", "trigger": "auto", "cwd": str(tmp_path),
            "transcript_path": str(t)}


def test_the_newest_reply_is_found_across_chunks(tmp_path: Path) -> None:
    t = transcript(tmp_path / "t.jsonl", [(5, "a"), (7, "b")], pad=200_000)
    assert last_reply(t) == (7, "b", True)
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


def test_one_prompt_while_tools_run_is_never_compressed(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    big = [(900_000, "gemini-2.5-pro")]
    one = transcript(tmp_path / "one.jsonl", big, prompts=1)
    assert prompts(one) == 1
    assert not about_to_compress(payload(tmp_path, one), env)
    # A text reply is what a continuation or a new prompt follows: the whole history goes.
    said = transcript(tmp_path / "said.jsonl", big, prompts=1, calls=False)
    assert about_to_compress(payload(tmp_path, said), env)
    two = transcript(tmp_path / "two.jsonl", big, prompts=2)
    assert prompts(two) == 2 and about_to_compress(payload(tmp_path, two), env)


def test_no_transcript_means_no(tmp_path: Path) -> None:
    assert not about_to_compress({"cwd": str(tmp_path)}, {})
    assert not about_to_compress(payload(tmp_path, tmp_path / "nope.jsonl"), {})
