"""`git-wal-hook AGENT`: the hook entry point agents find on PATH, and the
launch cache that makes it as fast as an absolute path.

The settings `git wal install` writes name no path of this machine: the hook
command (hook_commands.py) looks ``git-wal-hook`` up on PATH, so the same committed
file works for every teammate, in any virtual environment, after any Python
upgrade. ``git-wal-hook`` is a console script: an interpreter start with
``site`` plus the imports of the script pip writes, about 15 ms more than the
stdlib client alone (``python -S -E hook_client.py``). So when it runs it
records, in the user's launch cache, how to run its own install's client
directly; the hook command reads the record of the ``git-wal-hook`` it found
and runs that client, and comes here only when no record is usable.

The cache is ``${XDG_CACHE_HOME:-$HOME/.cache}/gitwal/hook-launch``: three
lines per record, the ``git-wal-hook`` path as the hook command found it on
PATH, the python of that install, and its ``hook_client.py``. Only this module
writes it (mode 0600, directory 0700); the hook command uses a record only
when its python is executable and its client is a file, and this module drops
such stale records at its next write. Losing the file costs one slow call.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_NAME = "hook-launch"
Record = tuple[str, str, str]  # (git-wal-hook as found on PATH, python, hook_client.py)


def cache_path(env: dict[str, str] | None = None) -> Path:
    """Where the hook command looks (the same expansion as its ``sh`` text)."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"),
                                                     ".cache")
    return Path(base) / "gitwal" / CACHE_NAME


def parse(text: str) -> list[Record]:
    """The records of a cache file; an incomplete last record is ignored (as
    the hook command's ``read`` loop does)."""
    lines = text.split("\n")[:-1]  # every record line ends with a newline
    return [(lines[i], lines[i + 1], lines[i + 2]) for i in range(0, len(lines) - 2, 3)]


def render(records: list[Record]) -> str:
    return "".join(f"{k}\n{p}\n{c}\n" for k, p, c in records)


def usable(record: Record) -> bool:
    _, python, client = record
    return os.access(python, os.X_OK) and os.path.isfile(client)


def remember(script: str, python: str, client: str, path: Path | None = None) -> bool:
    """Record that ``script`` (a ``git-wal-hook`` as PATH gave it) runs ``client``
    with ``python``; True if the cache changed. Never raises: a hook call must
    not fail for want of a cache."""
    record = (script, python, client)
    if not all(os.path.isabs(x) and "\n" not in x for x in record):
        return False  # a relative PATH entry, or a name the line format cannot hold
    path = cache_path() if path is None else path
    try:
        try:
            old = parse(path.read_text(encoding="utf-8", errors="surrogateescape"))
        except FileNotFoundError:
            old = []
        if old.count(record) == 1 and all(usable(r) for r in old):
            return False
        new = [r for r in old if r[0] != script and usable(r)] + [record]
        from ..base.durable import atomic_write, makedirs_durable  # only on a cache miss

        if not path.parent.is_dir():
            makedirs_durable(path.parent, 0o700)
        atomic_write(path, render(new).encode("utf-8", "surrogateescape"), 0o600, tag="gitwal")
        return True
    except (OSError, ValueError):
        return False


def main() -> int:
    """The ``git-wal-hook`` console script: remember this install, then run the
    client exactly as the fast path does (server, or the hook in process)."""
    from . import client

    here = Path(__file__).resolve().parent
    remember(sys.argv[0], sys.executable, str(here / "hook_client.py"))
    return client.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
