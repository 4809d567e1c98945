"""Scripted models for the fake API: what "Claude" does in each scenario.

Each player is a callable from a request to the blocks of its reply, and is
stateless between requests, like a model: everything it knows comes from the
request (the transcript Claude Code sends, the system prompt, and any context
hooks added). That is what makes the resume scenario meaningful: after a
crash, the only account of an interrupted call is gitwal's resume prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fake_api import Block, Request, Text, ToolUse

OLD, NEW = "getUserById", "fetchUser"
SUMMARY = ("<analysis>The user asked for a rename; edits so far are in the transcript."
           "</analysis>\n<summary>Renaming getUserById to fetchUser, file by file.</summary>")
COMPACT_MARK = "create a detailed summary of the conversation"


def is_compaction(req: Request) -> bool:
    """Claude Code's summary request (``/compact``), which must get text only."""
    texts = req.user_texts()
    return bool(texts) and COMPACT_MARK in texts[-1]


# -- the 40-file rename ---------------------------------------------------------


def rename_files(n: int = 40) -> dict[str, str]:
    """``src/f01.ts`` ... : odd files use the name once, even files twice."""
    files = {"src/users.ts": f"export function {OLD}(id: number) {{ return {{ id }}; }}\n"}
    for i in range(1, n + 1):
        body = f"import {{ {OLD} }} from './users';\n" if i % 2 == 0 else ""
        call = f"{OLD}({i})" if i % 2 == 0 else f"require('./users').{OLD}({i})"
        files[f"src/f{i:02d}.ts"] = f"{body}export const user{i} = {call};\n"
    return files


def renamed(files: dict[str, str], paths: Sequence[str]) -> dict[str, str]:
    """What the rename leaves: ``paths`` renamed, the rest untouched."""
    return {p: (t.replace(OLD, NEW) if p in paths else t) for p, t in files.items()}


def edit_for(repo: Path, path: str, text: str) -> ToolUse:
    """The Edit call that renames in ``path``: one occurrence, or replace_all."""
    if text.count(OLD) == 1:
        line = next(ln for ln in text.splitlines() if OLD in ln)
        return ToolUse("Edit", {"file_path": str(repo / path), "old_string": line,
                                "new_string": line.replace(OLD, NEW)})
    return ToolUse("Edit", {"file_path": str(repo / path), "old_string": OLD,
                            "new_string": NEW, "replace_all": True})


ResumeParser = Callable[[str, Sequence[str]], int | None]


def _mentions(text: str, path: str) -> bool:
    return re.search(r"(?<![\w./-])" + re.escape(path) + r"(?![\w.-])", text) is not None


def gitwal_resume_point(text: str, plan: Sequence[str]) -> int | None:
    """Index in ``plan`` where gitwal's resume prompt says to continue, or None.

    Read from the prompt alone: its ``Action:`` line names the step to redo or
    the next one, or the last one done ("from the step after LSN n (Edit
    PATH)"); failing that, the ``Committed:`` line names the last step done,
    and work continues after it.
    """
    actions = [ln for ln in text.splitlines() if ln.lstrip().startswith("Action:")]
    if actions:
        action = actions[-1]
        hits = [i for i, p in enumerate(plan) if _mentions(action, p)]
        if hits:
            return hits[-1] + 1 if "from the step after" in action else hits[0]
    committed = [ln for ln in text.splitlines() if ln.lstrip().startswith("Committed:")]
    if committed:
        if "no step yet" in committed[-1]:
            return 0
        hits = [i for i, p in enumerate(plan) if _mentions(committed[-1], p)]
        if hits:
            return hits[-1] + 1
    return None


@dataclass
class RenameAgent:
    """Renames ``OLD`` to ``NEW`` with one Edit per file, in plan order.

    Done = files whose Edit has a successful result in the transcript, plus,
    when the request carries a resume prompt (``resume_marker`` found in it),
    every plan file before the point the prompt names. An Edit the transcript
    calls interrupted is done only if the prompt says so.
    """

    repo: Path
    files: dict[str, str]
    plan: Sequence[str]
    resume_marker: str = "Action:"
    parse_resume: ResumeParser = gitwal_resume_point
    # (request seq, resume index) for every request that carried a resume prompt
    resumes: list[tuple[int, int]] = field(default_factory=list)

    def __call__(self, req: Request) -> Sequence[Block]:
        if is_compaction(req):
            return [Text(SUMMARY)]
        paths = {u["id"]: str(u.get("input", {}).get("file_path", ""))
                 for u in req.tool_uses() if u.get("name") == "Edit"}
        done = {paths[r["tool_use_id"]] for r in req.tool_results()
                if r.get("tool_use_id") in paths and not r.get("is_error")}
        text = req.all_text()
        if self.resume_marker in text:
            point = self.parse_resume(text, self.plan)
            if point is None:
                raise ValueError("a resume prompt is present but names no resume point")
            self.resumes.append((req.seq, point))
            done |= {str(self.repo / p) for p in self.plan[:point]}
        for p in self.plan:
            if str(self.repo / p) not in done:
                return [Text(f"Renaming {OLD} in {p}."), edit_for(self.repo, p, self.files[p])]
        return [Text(f"Renamed {OLD} to {NEW} in {len(self.plan)} files.")]


# -- a fixed list of tool calls ---------------------------------------------------


@dataclass
class Steps:
    """Plays ``steps`` in order: step n once the transcript holds n tool results."""

    steps: Sequence[ToolUse]
    final: str = "All steps done."

    def __call__(self, req: Request) -> Sequence[Block]:
        if is_compaction(req):
            return [Text(SUMMARY)]
        n = len({r.get("tool_use_id") for r in req.tool_results()})
        if n < len(self.steps):
            return [Text(f"Step {n + 1}."), self.steps[n]]
        return [Text(self.final)]


def bash(command: str, description: str = "Run a step of the task") -> ToolUse:
    return ToolUse("Bash", {"command": command, "description": description})


def edit_results(requests: Sequence[Request]) -> dict[str, list[dict[str, Any]]]:
    """The result of every Edit call Claude Code reported, by file, across ``requests``.

    One entry per tool_use id, although later requests repeat the transcript.
    After a SIGKILL the resumed transcript can lack results that an earlier
    request carried (Claude Code writes it behind), and marks such a call
    interrupted: a successful result seen in any request wins.
    """
    uses: dict[str, str] = {}
    results: dict[str, dict[str, Any]] = {}
    for req in requests:
        for u in req.tool_uses():
            if u.get("name") == "Edit":
                uses[u["id"]] = str(u.get("input", {}).get("file_path", ""))
        for r in req.tool_results():
            tid = r.get("tool_use_id")
            if tid in uses and (tid not in results or results[tid].get("is_error")):
                results[tid] = r
    out: dict[str, list[dict[str, Any]]] = {}
    for tid, r in results.items():
        out.setdefault(uses[tid], []).append(r)
    return out


INTERRUPTED = "outcome is unknown"  # Claude Code's result for a call cut off by a crash


def is_interrupted(result: dict[str, Any]) -> bool:
    return bool(result.get("is_error")) and INTERRUPTED in json.dumps(result.get("content"))
