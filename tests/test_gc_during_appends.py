"""`git gc --prune=now` in another process while steps append: an append's
own objects are born in a kept pack and survive every prune; an append whose
image a prune removed before the append is refused cleanly (error + hint);
the log never points at a pruned object and has no gap (docs/format.md,
"Packs")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .conftest import ok, wal

APPLIES = 40


def test_appends_survive_a_concurrent_gc(repo: Path, tmp_path: Path) -> None:
    ok(repo, "begin", "--run", "r", "--task", "gc race")
    go = tmp_path / "go"
    os.mkfifo(go)
    # gc waits for the first append, then prunes back to back until told to stop.
    stop = tmp_path / "stop"
    loop = (f"read line < {go}; n=0; while [ ! -e {stop} ]; do "
            f"git gc --prune=now -q 2>>{tmp_path / 'gc.err'}; n=$((n+1)); done; "
            f"echo $n > {tmp_path / 'rounds'}")
    gc = subprocess.Popen(["sh", "-c", loop], cwd=repo)
    failed: list[str] = []
    done, released = 0, False
    try:
        for i in range(APPLIES):
            proc = wal(repo, "apply", "--run", "r", "write-file", f"f{i % 7}.txt",
                       input=f"{i}\n".encode())
            if proc.returncode:
                assert "Traceback" not in proc.stderr, proc.stderr
                lines = proc.stderr.splitlines()
                assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), \
                    proc.stderr
                failed.append(lines[0])
                rec = wal(repo, "recover", "--run", "r", "--json")  # a step left open
                assert rec.returncode in (0, 1) and "Traceback" not in rec.stderr, rec.stderr
            else:
                done += 1
            if not released:
                with open(go, "w") as gate:  # gc starts after the first append
                    gate.write("go\n")
                released = True
    finally:
        stop.touch()
        if not released:
            with open(go, "w") as gate:
                gate.write("go\n")
        gc.wait()
    assert gc.returncode == 0
    assert int((tmp_path / "rounds").read_text()) > 1  # gc ran while steps appended
    assert done > 0

    # gc never met a missing object (its pack-refs may lose a race for the
    # log's ref lock to an append: "cannot lock ref", harmless to both).
    complaints = [line for line in (tmp_path / "gc.err").read_text().splitlines()
                  if "cannot lock ref 'refs/wal/r'" not in line]
    assert complaints == []
    st = json.loads(ok(repo, "status", "--run", "r", "--json"))
    assert st["open"] == []
    ok(repo, "verify", "--run", "r")
    assert json.loads(ok(repo, "recover", "--run", "r", "--json"))["intents"] == []
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert [r["lsn"] for r in rows] == list(range(1, len(rows) + 1))  # no gap
    # Every step that reported success is in the log, committed.
    committed = {r["lsn"] for r in rows if r["type"] == "commit"}
    assert len(committed) >= done
    git_gc = subprocess.run(["git", "gc", "--prune=now", "-q"], cwd=repo,
                            capture_output=True, text=True)
    assert git_gc.returncode == 0, git_gc.stderr  # no ref reaches a pruned object
    for line in failed:  # every failure said what happened
        assert any(why in line for why in ("was undone", "is missing", "could not write",
                                           "was removed by a concurrent",
                                           "is locked", "moved while")), line
