"""The redo command lines the resume prompt hands the model."""

from __future__ import annotations

import shlex

from gitwal.prompt import redo_command

A = "a" * 40


def test_write_files_redo_is_one_command_per_path_in_order() -> None:
    cmd = redo_command("write_files", {"paths": ["src/a b.py", "old.txt"],
                                       "contents": [A, "absent"], "agent": {}}, step=3)
    assert cmd == (f"git cat-file blob {A} | git wal apply --step 3 write-file "
                   f"{shlex.quote('src/a b.py')} --from - && "
                   "git wal apply --step 3 delete-file old.txt")


def test_file_tool_redo_quotes_its_arguments() -> None:
    cmd = redo_command("replace_text", {"path": "x.txt", "old": "it's", "new": "$HOME"})
    assert shlex.split(cmd) == ["git", "wal", "apply", "replace-text", "x.txt", "--old",
                                "it's", "--new", "$HOME"]
