"""Appends are born in small kept packs (gitwal/log/packwrite.py): git reads
them as its own, gc never removes them, and gitwal merges them so their
number stays bounded (docs/format.md, "Packs")."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from gitwal import Wal
from gitwal.log.packmerge import MERGE_AT, merge, merge_tier, pack_entries, read_pack
from gitwal.log.packwrite import (
    BLOB,
    KEEP_MESSAGE,
    MODE_BLOB,
    TREE,
    RawObject,
    tree_data,
    write_kept_pack,
)

from .conftest import git, init_repo, ok


def _kept(repo: Path) -> list[Path]:
    return sorted(k for k in (repo / ".git" / "objects" / "pack").glob("pack-*.keep")
                  if k.read_bytes() == KEEP_MESSAGE)


def test_an_append_is_one_kept_pack_git_reads(repo: Path) -> None:
    ok(repo, "begin", "--run", "r")
    ok(repo, "apply", "--run", "r", "write-file", "a.txt", input=b"a\n")
    kept = _kept(repo)
    assert len(kept) == 3  # plan, intent, commit
    for keep in kept:
        out = git(repo, "verify-pack", "-v", str(keep.with_suffix(".idx")))
        assert "non delta:" in out
    head = git(repo, "rev-parse", "refs/wal/r").strip()
    assert not (repo / ".git" / "objects" / head[:2] / head[2:]).exists()  # never loose
    git(repo, "fsck", "--strict", "--no-dangling")
    git(repo, "gc", "--prune=now", "-q")
    assert _kept(repo) == kept
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert [r["type"] for r in rows] == ["plan", "intent", "commit"]


@pytest.mark.slow
def test_packs_are_merged_and_nothing_is_lost(repo: Path) -> None:
    ok(repo, "begin", "--run", "r")
    steps = MERGE_AT  # two appends each: the merge runs at least once
    for i in range(steps):
        ok(repo, "apply", "--run", "r", "write-file", f"f{i % 5}.txt", input=f"{i}\n".encode())
    kept = _kept(repo)
    assert 1 < len(kept) < MERGE_AT  # merged, and later appends packed on their own
    merged = max(kept, key=lambda k: k.with_suffix(".pack").stat().st_size)
    assert len(read_pack(merged.with_suffix(".pack"))) >= 3 * MERGE_AT
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    assert [r["lsn"] for r in rows] == list(range(1, 2 * steps + 2))
    git(repo, "gc", "--prune=now", "-q")
    git(repo, "fsck", "--strict", "--no-dangling")
    ok(repo, "verify", "--run", "r")
    assert (repo / "f0.txt").read_text() == f"{(steps - 1) // 5 * 5}\n"


def test_a_pack_round_trips_through_git(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    objects = [RawObject(BLOB, b"x" * 70000), RawObject(BLOB, b"")]
    tree = RawObject(TREE, tree_data([("b", MODE_BLOB, objects[0].oid),
                                      ("a", MODE_BLOB, objects[1].oid)]))
    name = write_kept_pack(tmp_path / ".git" / "objects", [*objects, tree, objects[0]])
    listed = git(tmp_path, "ls-tree", tree.oid)
    assert listed.splitlines() == [f"100644 blob {objects[1].oid}\ta",
                                   f"100644 blob {objects[0].oid}\tb"]
    assert git(tmp_path, "cat-file", "-s", objects[0].oid).strip() == "70000"
    packed = read_pack(tmp_path / ".git" / "objects" / "pack" / f"{name}.pack")
    assert [o.oid for o in packed] == [objects[0].oid, objects[1].oid, tree.oid]


def test_merges_go_by_size_tier() -> None:
    small, mid, big = 4 << 10, 2 << 20, 64 << 20
    assert merge_tier([small] * (MERGE_AT - 1)) is None
    assert merge_tier([small] * MERGE_AT) == 1 << 20
    # Full-size packs never count toward a tier; mid-size ones only the second.
    assert merge_tier([big] * 100 + [small] * (MERGE_AT - 1)) is None
    assert merge_tier([mid] * MERGE_AT + [small]) == 32 << 20
    # A mid-size pack is not merged again because small ones piled up beside it.
    assert merge_tier([mid] + [small] * (MERGE_AT - 1)) is None
    assert merge_tier([mid] * (MERGE_AT - 1) + [small] * (MERGE_AT - 1)) is None


def test_a_shell_step_packs_what_differs_from_head_not_the_whole_tree(tmp_path: Path) -> None:
    """The committed files are loose (never packed) and reachable from HEAD:
    an exec step's snapshot names them but does not copy them; its new file
    and the trees above it are copied. Once appended, the log's ref reaches
    the whole snapshot: it survives a prune, also after HEAD moved away."""
    files = {f"d{i // 10}/f{i}.txt": f"{i}\n" for i in range(60)}
    repo = init_repo(tmp_path / "repo", files)
    ok(repo, "begin", "--run", "r")
    before = set(_kept(repo))
    ok(repo, "exec", "--run", "r", "--", "sh", "-c", "echo new > d3/new.txt")
    objects = [o for keep in set(_kept(repo)) - before
               for o in read_pack(keep.with_suffix(".pack"))]
    # intent and commit appends: records, their trees and commits; the post
    # snapshot's root and d3/ trees and the new blob; nothing of HEAD's 60 files.
    blobs = {o.data for o in objects if o.kind == BLOB}
    assert b"new\n" in blobs and not blobs & {t.encode() for t in files.values()}
    assert len(objects) < 15
    git(repo, "gc", "--prune=now", "-q")
    ok(repo, "verify", "--run", "r")
    git(repo, "checkout", "-q", "--orphan", "other")
    git(repo, "rm", "-rq", "--cached", ".")
    git(repo, "commit", "-q", "--allow-empty", "-m", "elsewhere")
    git(repo, "branch", "-D", "main")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "--prune=now", "-q")
    rows = [json.loads(line) for line in ok(repo, "log", "--run", "r", "--json").splitlines()]
    (post,) = rows[-1]["post"]
    assert git(repo, "cat-file", "-p", f"{post}:d0/f3.txt") == "3\n"
    assert git(repo, "cat-file", "-p", f"{post}:d3/new.txt") == "new\n"


def test_a_long_lived_process_does_not_keep_merged_packs_open(repo: Path) -> None:
    """libgit2 keeps every pack it read open, also once a merge deleted it: a
    process appending for hours (the hook server, a harness) must not run
    out of file descriptors."""
    run = Wal(repo).begin(task="long")

    def deleted_packs() -> int:
        out = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                out += "/objects/pack/" in target and target.endswith("(deleted)")
        return out

    for i in range(3 * MERGE_AT):  # two appends a step: several merges
        run.apply("write_file", path="a.txt", content=f"{i}\n".encode())
    assert len(_kept(repo)) < MERGE_AT  # merges ran
    assert deleted_packs() == 0
    assert run.records()[-1].lsn == 1 + 2 * 3 * MERGE_AT


def test_a_merge_copies_entries_as_stored_and_refuses_a_damaged_pack(tmp_path: Path) -> None:
    """A merge finds each object through the pack's index and copies its
    deflated bytes: what git reads back is the same; a pack whose bytes no
    longer match its index's CRC-32 is not merged, and not deleted."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    objects_dir = tmp_path / ".git" / "objects"
    blobs = [RawObject(BLOB, f"object {i}\n".encode() * (i + 1)) for i in range(MERGE_AT)]
    names = [write_kept_pack(objects_dir, [blob, blobs[0]]) for blob in blobs[1:]]
    names.insert(0, write_kept_pack(objects_dir, [RawObject(BLOB, b"first\n")]))
    entries = pack_entries(objects_dir / "pack" / f"{names[1]}.pack")
    assert sorted(b.hex() for b, _e in entries) == sorted({blobs[0].oid, blobs[1].oid})
    damaged = objects_dir / "pack" / f"{names[5]}.pack"
    data = bytearray(damaged.read_bytes())
    data[14] ^= 0xFF  # inside the first entry's deflated bytes
    damaged.chmod(0o644)
    damaged.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="not an intact pack"):
        pack_entries(damaged)
    merged = merge(objects_dir)  # the tier holds 32 packs: the 31 intact ones are merged
    assert merged is not None and damaged.exists()
    assert len(_kept(tmp_path)) == 2  # the merged pack, and the damaged one left alone
    git(tmp_path, "verify-pack", str(objects_dir / "pack" / f"{merged}.idx"))
    for blob in blobs[:5] + blobs[6:]:
        assert git(tmp_path, "cat-file", "-p", blob.oid) == blob.data.decode()


def test_a_pack_whose_index_a_crash_lost_is_merged_from_its_own_bytes(tmp_path: Path) -> None:
    """A crash between the .pack and the .idx leaves a kept pack git cannot
    read; the next merge reads the pack itself and takes it in."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    objects_dir = tmp_path / ".git" / "objects"
    blobs = [RawObject(BLOB, f"blob {i}\n".encode()) for i in range(MERGE_AT)]
    names = [write_kept_pack(objects_dir, [blob]) for blob in blobs]
    (objects_dir / "pack" / f"{names[3]}.idx").unlink()
    merged = merge(objects_dir)
    assert merged is not None
    assert _kept(tmp_path) == [objects_dir / "pack" / f"{merged}.keep"]
    assert git(tmp_path, "cat-file", "-p", blobs[3].oid) == "blob 3\n"
