"""Hook commands the tests add next to gitwal's own (Claude Code runs every
matching hook of an event in parallel).

    python tests/e2e/hook_helpers.py record FILE
        append the hook's input (one JSON object per line) to FILE
    python tests/e2e/hook_helpers.py gate TEXT ENTERED
        if the tool input mentions TEXT: create ENTERED and block until the
        test releases the FIFO ENTERED.release (or kills the hook; at most
        120 s), holding the tool call between PreToolUse and the tool, so a
        test can SIGKILL Claude Code there
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import sys
from pathlib import Path

GATE_SECONDS = 120


def command(*args: str) -> str:
    """The shell command line that runs this module with ``args``."""
    return " ".join(shlex.quote(a) for a in (sys.executable, __file__, *args))


def release_path(entered: Path) -> Path:
    return entered.with_name(entered.name + ".release")


def stop_gate(entered: Path) -> None:
    """Release the gate, and SIGKILL the gate hook's process group (named in
    ``entered``), if it still runs."""
    try:
        fd = os.open(release_path(entered), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no gate, or nobody waits at it any more
        pass
    else:
        os.write(fd, b"go\n")
        os.close(fd)
    try:
        os.killpg(int(entered.read_text()), signal.SIGKILL)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pass


def main(argv: list[str]) -> int:
    data = sys.stdin.read()
    if argv[0] == "record":
        with open(argv[1], "a") as f:
            f.write(json.dumps(json.loads(data)) + "\n")
        return 0
    if argv[0] == "gate":
        payload = json.loads(data)
        if argv[1] in json.dumps(payload.get("tool_input", {})):
            # Claude Code starts each hook in a process group of its own, which
            # outlives a SIGKILL of Claude Code: the test ends it by this id.
            release = release_path(Path(argv[2]))
            os.mkfifo(release)
            gate = os.open(release, os.O_RDONLY | os.O_NONBLOCK)  # readable once written
            tmp = Path(argv[2] + ".tmp")  # renamed into place: never seen half-written
            tmp.write_text(str(os.getpgid(0)))
            tmp.rename(argv[2])
            select.select([gate], [], [], GATE_SECONDS)
        return 0
    print(f"unknown helper {argv[0]!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
