"""The log is ordinary git history: `git fsck --strict` finds nothing wrong with
it, and `git gc --prune=now` keeps every object a record names alive."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import git, init_repo, ok, tree_of, wal

RUN = "gc-run"
FILES = {
    "a.ts": "export function getUserById(id: string) {\n  return id;\n}\ngetUserByIdCache();\n",
    "b.js": "const x = $el + _tmp;\n",
    "notes.txt": "alpha\nsecond line\ngamma\n",
    "old.txt": "to be moved\n",
    "gone.txt": "to be deleted\n",
    "tool.sh": "#!/bin/sh\necho tool\n",
}
BINARY = bytes(range(256)) * 4


def fsck(repo: Path) -> None:
    proc = subprocess.run(
        ["git", "fsck", "--strict", "--full", "--no-dangling", "--no-progress"],
        cwd=repo, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == "", proc.stdout + proc.stderr


def exists(repo: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=repo).returncode == 0


def rows(repo: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(repo, "log", "--json").splitlines()]


def as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


def named_objects(log: list[dict[str, Any]]) -> set[str]:
    """Every object id a pre/post of an intent or a commit names."""
    out: set[str] = set()
    for row in log:
        if row["type"] in ("intent", "commit"):
            out.update(as_list(row.get("pre")) + as_list(row["post"]))
    out.discard("absent")
    return out


def make_run(repo: Path, scratch: Path) -> None:
    os.chmod(repo / "tool.sh", 0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tool is executable")
    (scratch / "data.src").write_bytes(BINARY)  # binary: through a file, not text stdin
    ok(repo, "begin", "--run", RUN, "--task", "every tool, then gc",
       "--step", "edit", "--step", "build")
    steps: list[tuple[list[str], bytes | None]] = [
        (["apply", "write-file", "new/a.txt"], b"fresh\n" * 50),
        (["apply", "write-file", "data.bin", "--from", str(scratch / "data.src")], None),
        (["apply", "write-file", "notes.txt"], b"alpha\nsecond line\ngamma\nrewritten\n"),
        (["apply", "replace-symbol", "a.ts", "getUserById", "fetchUser"], None),
        (["apply", "replace-symbol", "b.js", "$el", "$node"], None),
        (["apply", "replace-text", "notes.txt", "--old", "gamma", "--new", "delta"], None),
        (["apply", "replace-text", "a.ts", "--old", "  return id;", "--new", "  return 1;"], None),
        (["apply", "ensure-line", "notes.txt", "omega"], None),
        (["apply", "ensure-line", "notes.txt", "omega"], None),  # already there: no change
        (["apply", "ensure-line", "fresh/list.txt", "first ✓"], None),
        (["apply", "delete-file", "gone.txt"], None),
        (["apply", "delete-file", "new/a.txt"], None),
        (["apply", "move-file", "old.txt", "moved/old.txt"], None),
        (["apply", "move-file", "tool.sh", "bin/tool.sh"], None),
        (["exec", "--", "sh", "-c", "mkdir -p gen && echo generated > gen/out.txt"], None),
        (["exec", "--idempotent", "--", "sh", "-c", "rm -f b.js && echo made > c.txt"], None),
    ]
    for args, stdin in steps:
        out = ok(repo, *args, input=stdin)
        assert "committed" in out
    # Two aborted steps: their pre/post objects are named by records too.
    failed = wal(repo, "apply", "--check", "false", "write-file", "aborted.txt",
                 input=b"never kept\n")
    assert failed.returncode == 1 and "aborted" in failed.stderr
    failed = wal(repo, "exec", "--", "sh", "-c", "echo junk > junk.txt; exit 3")
    assert failed.returncode == 1 and "aborted" in failed.stderr
    assert not (repo / "aborted.txt").exists() and not (repo / "junk.txt").exists()


@pytest.mark.slow
def test_fsck_then_gc_keeps_every_logged_object(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", FILES)
    make_run(repo, tmp_path)
    assert (repo / "a.ts").read_text().startswith("export function fetchUser(")
    assert (repo / "bin" / "tool.sh").stat().st_mode & 0o111
    assert (repo / "gen" / "out.txt").read_text() == "generated\n"

    before = rows(repo)
    kinds = [r["tool"] for r in before if r["type"] == "intent"]
    assert set(kinds) == {"write_file", "replace_symbol", "replace_text", "ensure_line",
                          "delete_file", "move_file", "exec"}
    statuses = [r["status"] for r in before if r["type"] == "intent"]
    assert statuses.count("aborted") == 2 and statuses.count("open") == 0
    named = named_objects(before)
    written = {r["args"]["content"] for r in before if r.get("tool") == "write_file"}
    assert written <= named
    on_main = {line.split()[0] for line in git(repo, "rev-list", "--objects", "main").split("\n")
               if line}
    only_in_log = named - on_main
    # Post-images and exec trees are reachable only through refs/wal: gc would drop them.
    assert len(only_in_log) >= 10, only_in_log
    assert all(exists(repo, oid) for oid in named)
    tree = tree_of(repo)

    fsck(repo)

    # A control: an object nothing references must not survive the gc.
    control = git(repo, "hash-object", "-w", "--stdin", input=b"unreferenced control\n").strip()
    record = git(repo, "rev-parse", f"refs/wal/{RUN}:{len(before):012d}.json").strip()
    loose = repo / ".git" / "objects" / record[:2] / record[2:]
    assert not loose.exists()  # born in a kept pack (docs/format.md, "Packs")
    kept = sorted((repo / ".git" / "objects" / "pack").glob("pack-*.keep"))
    assert kept and all(k.with_suffix(".pack").exists() for k in kept)

    gc = subprocess.run(["git", "gc", "--prune=now", "--quiet"], cwd=repo,
                        capture_output=True, text=True)
    assert gc.returncode == 0, gc.stderr
    assert not exists(repo, control), "gc did not prune: the test would prove nothing"
    assert sorted((repo / ".git" / "objects" / "pack").glob("pack-*.keep")) == kept
    assert not (repo / ".git" / "refs" / "wal" / RUN).exists()  # the ref is packed now
    assert f"refs/wal/{RUN}" in (repo / ".git" / "packed-refs").read_text()

    after = rows(repo)
    assert after == before
    assert only_in_log <= named
    missing = sorted(oid for oid in named if not exists(repo, oid))
    assert not missing, f"objects named by the log were lost by gc: {missing}"
    for oid in written:
        assert git(repo, "cat-file", "-t", oid).strip() == "blob"
    contents = {
        subprocess.run(["git", "cat-file", "blob", oid], cwd=repo, capture_output=True,
                       check=True).stdout
        for oid in written
    }
    assert BINARY in contents and b"fresh\n" * 50 in contents
    for row in after:
        if row.get("tool") == "exec":
            assert git(repo, "cat-file", "-t", as_list(row["pre"])[0]).strip() == "tree"

    report = json.loads(ok(repo, "recover", "--json"))
    assert report["in_doubt"] is False
    assert report["intents"] == [] and report["drift"] == []
    assert report["records"] == len(before)
    assert report["next_lsn"] == len(before) + 1
    assert tree_of(repo) == tree  # recovery found nothing to repair

    # The run goes on after gc (packed ref, packed objects), and stays clean.
    ok(repo, "apply", "ensure-line", "notes.txt", "after gc")
    assert (repo / "notes.txt").read_text().endswith("omega\nafter gc\n")
    last = rows(repo)[-2:]
    assert [r["type"] for r in last] == ["intent", "commit"]
    assert last[0]["lsn"] == len(before) + 1 and last[0]["status"] == "committed"
    fsck(repo)
