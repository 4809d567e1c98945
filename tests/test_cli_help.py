"""git's conventions for `git wal`: `help`, `-h`, the man page behind
`git wal --help`, shell completion that git's own completion dispatches to,
and a clear refusal on a platform gitwal does not support."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gitwal.cli import main


def test_an_unsupported_platform_is_refused_with_a_hint_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SystemExit) as exit_:
        main(["status"])
    assert exit_.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("error: gitwal does not run on this platform (win32)\n"
                   "hint: gitwal supports Linux (README \"Supported platforms\"); "
                   "on Windows, run it inside WSL 2\n")
