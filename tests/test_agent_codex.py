"""Codex CLI: the apply_patch format, and the hooks run as Codex runs them (payloads
shaped as its hooks documentation shows: the patch in ``tool_input.command``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitwal.agents import apply_patch
from gitwal.base.errors import ToolRefused

from .conftest import git, ok
from .test_agent_payloads import SESSION, run_hook, wal_log

RUN = f"codex-{SESSION}"

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/app.py
*** Move to: src/main.py
@@ def main():
-    return 1
+    return 2
*** Delete File: old.txt
*** Update File: README
@@
-hello
+hello, world
*** End Patch
"""


def codex(repo: Path, event: str, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"session_id": SESSION, "turn_id": "turn-1",
                               "transcript_path": None, "cwd": str(repo),
                               "hook_event_name": event, "model": "gpt-5-codex"}
    payload.update(fields)
    return payload


def codex_tool(repo: Path, event: str, tool: str, command: str, call: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if event == "PostToolUse":
        extra["tool_response"] = {"output": "", "exit_code": 0}
    return codex(repo, event, tool_name=tool, tool_use_id=call,
                 tool_input={"command": command}, **extra)


def seed(repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("def main():\n    return 1\n")
    (repo / "old.txt").write_text("old\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "seed")


def test_parse_and_post_images() -> None:
    ops = apply_patch.parse(PATCH)
    assert [(o.kind, o.path, o.move_to) for o in ops] == [
        ("add", "docs/new.md", None), ("update", "src/app.py", "src/main.py"),
        ("delete", "old.txt", None), ("update", "README", None)]
    paths = apply_patch.targets(ops)
    assert paths == ["docs/new.md", "src/app.py", "src/main.py", "old.txt", "README"]
    pre = {"docs/new.md": None, "src/app.py": b"def main():\n    return 1\n",
           "src/main.py": None, "old.txt": b"old\n", "README": b"hello\n"}
    post = apply_patch.post_images(ops, pre)
    assert post == {"docs/new.md": b"# New\ntext\n", "src/app.py": None,
                    "src/main.py": b"def main():\n    return 2\n", "old.txt": None,
                    "README": b"hello, world\n"}


def test_hunks_match_in_order_with_loose_white_space_and_end_of_file() -> None:
    text = "a\nb\nc\nb\nend  \n"
    patch = ("*** Begin Patch\n*** Update File: f\n@@\n b\n-c\n+C\n@@\n-end\n+END\n"
             "*** End of File\n*** End Patch")
    [op] = apply_patch.parse(patch)
    assert apply_patch.apply_update(text, op.chunks, "f") == "a\nb\nC\nb\nEND\n"


@pytest.mark.parametrize("bad", [
    "no envelope",
    "*** Begin Patch\n*** End Patch",
    "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch",
    "*** Begin Patch\n*** Update File: x\n*** End Patch",
])
def test_malformed_patches_are_refused(bad: str) -> None:
    with pytest.raises(ToolRefused):
        apply_patch.parse(bad)


def test_a_hunk_that_does_not_match_is_refused() -> None:
    [op] = apply_patch.parse("*** Begin Patch\n*** Update File: f\n@@\n-zzz\n+y\n*** End Patch")
    with pytest.raises(ToolRefused, match="not found"):
        apply_patch.post_images([op], {"f": b"a\n"})
    with pytest.raises(ToolRefused, match="does not exist"):
        apply_patch.post_images([op], {"f": None})


@pytest.mark.slow
def test_apply_patch_is_one_multi_target_intent(repo: Path) -> None:
    seed(repo)
    r = run_hook(repo, "codex", codex_tool(repo, "PreToolUse", "apply_patch", PATCH, "call_1"))
    assert r.code == 0, r.err
    [intent] = [x for x in wal_log(repo, RUN) if x["type"] == "intent"]
    assert intent["tool"] == "write_files"
    assert intent["target"] == ["docs/new.md", "src/app.py", "src/main.py", "old.txt", "README"]
    assert intent["args"]["agent"] == {"name": "codex", "tool": "apply_patch", "call": "call_1",
                                       "turn": "turn-1"}  # Codex names the turn
    assert intent["post"][1] == "absent" and intent["post"][3] == "absent"
    assert git(repo, "cat-file", "blob", intent["post"][2]) == "def main():\n    return 2\n"
    # Codex applies the patch.
    (repo / "docs").mkdir()
    (repo / "docs" / "new.md").write_text("# New\ntext\n")
    (repo / "src" / "app.py").rename(repo / "src" / "main.py")
    (repo / "src" / "main.py").write_text("def main():\n    return 2\n")
    (repo / "old.txt").unlink()
    (repo / "README").write_text("hello, world\n")
    r = run_hook(repo, "codex", codex_tool(repo, "PostToolUse", "apply_patch", PATCH, "call_1"))
    assert r.code == 0, r.err
    log = wal_log(repo, RUN)
    [commit] = [x for x in log if x["type"] == "commit"]
    assert commit["post"] == intent["post"] and commit["verified"].startswith("hash==post")
    assert [x for x in log if x["type"] == "unlogged"] == []
    verified = json.loads(ok(repo, "verify", "--run", RUN, "--json"))
    assert verified["ok"], verified


def test_a_patch_gitwal_cannot_apply_is_logged_with_an_unknown_post(repo: Path) -> None:
    # Codex may still apply it (its matching, or a newer version's, is looser):
    # the intent comes first, and the tree decides it when the call closes.
    bad = "*** Begin Patch\n*** Update File: README\n@@\n-nope\n+x\n*** End Patch"
    r = run_hook(repo, "codex", codex_tool(repo, "PreToolUse", "apply_patch", bad, "call_1"))
    assert (r.code, r.out) == (0, ""), r.err
    [intent] = [x for x in wal_log(repo, RUN) if x["type"] == "intent"]
    assert intent["post"] == ["unknown"] and intent["target"] == ["README"]


@pytest.mark.slow
def test_bash_and_session_start_and_blocking(repo: Path) -> None:
    r = run_hook(repo, "codex", codex(repo, "SessionStart", source="startup"))
    assert r.code == 0 and RUN in r.json()["hookSpecificOutput"]["additionalContext"]
    r = run_hook(repo, "codex", codex_tool(repo, "PreToolUse", "Bash", "touch t.txt", "c2"))
    assert r.code == 0, r.err
    (repo / "t.txt").write_text("")
    r = run_hook(repo, "codex", codex_tool(repo, "PostToolUse", "Bash", "touch t.txt", "c2"))
    assert r.code == 0, r.err
    assert [x["status"] for x in wal_log(repo, RUN) if x["type"] == "intent"] == ["committed"]
    (repo / ".git" / "refs" / "wal" / RUN).write_text("broken\n")
    r = run_hook(repo, "codex", codex_tool(repo, "PreToolUse", "Bash", "ls", "c3"))
    assert r.code == 2 and "refused" in r.err


def test_install_codex_merges_into_hooks_json(repo: Path) -> None:
    (repo / ".codex").mkdir()
    mine = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say hi"}]}]}}
    (repo / ".codex" / "hooks.json").write_text(json.dumps(mine))
    out = ok(repo, "install", "codex")
    assert "features" in out  # how to turn Codex's hooks on, for older releases
    data = json.loads((repo / ".codex" / "hooks.json").read_text())
    assert data["hooks"]["PreToolUse"][0]["matcher"].startswith("Bash|apply_patch")
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == "say hi"
    assert len(data["hooks"]["Stop"]) == 2
    ok(repo, "uninstall", "codex")
    assert json.loads((repo / ".codex" / "hooks.json").read_text()) == mine
