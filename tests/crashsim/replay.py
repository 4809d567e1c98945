"""Write a crash state to disk: copy the snapshot, then make every directory
the image changed match it (entries removed, files rewritten with their
surviving bytes and mode, new directories and symlinks created)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .image import Image
from .ops import ROOT, InodeId


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def materialise(image: Image, dest: Path) -> None:
    """Create ``dest`` holding exactly what ``image`` shows."""
    shutil.copytree(image.snapshot, dest, symlinks=True)
    _sync(image, ROOT, "", dest)


def _sync(image: Image, ino: InodeId, rel: str, path: Path) -> None:
    node = image.node(ino)
    if image.unchanged(rel, node) and (node.kind != "dir" or node.entries is None):
        return  # the copy already holds it, untouched
    if node.kind == "file":
        if path.exists() or path.is_symlink():
            _remove(path)
        path.write_bytes(image.data(ino))
        os.chmod(path, node.mode)
        return
    if node.kind == "symlink":
        if path.exists() or path.is_symlink():
            _remove(path)
        os.symlink(node.target, path)
        return
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        _remove(path)
    if not path.exists():
        path.mkdir()
    entries = image.entries(ino)
    for name in sorted(set(os.listdir(path)) - set(entries)):
        _remove(path / name)
    for name, child in sorted(entries.items()):
        _sync(image, child, f"{rel}/{name}" if rel else name, path / name)
    os.chmod(path, node.mode)
