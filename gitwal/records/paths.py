"""The paths a record may name: normalised, relative to the working tree's
root, POSIX, never through ``.git``. A reader refuses a record naming any
other before anything looks at the tree (docs/format.md "Validation").
"""

from __future__ import annotations

from typing import Any


def path_problem(path: object) -> str:
    """Why ``path`` is not a normalised tree-relative POSIX path ("" when it is).

    The same rules as Worktree.confine, without the file system: a reader can
    refuse a record before anything looks at the tree."""
    if not isinstance(path, str):
        return f"path {path!r} is not a string"
    if not path or "\0" in path:
        return f"path {path!r} is empty or contains NUL"
    if path.startswith("/"):
        return f"path {path!r} is absolute"
    if "\\" in path:
        return f"path {path!r} contains a backslash"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"path {path!r} has an empty, '.' or '..' component"
        if part.lower() == ".git":
            return f"path {path!r} goes through .git"
    return ""


def checked_paths(name: str, values: Any, non_empty: bool = False,
                  distinct: bool = False) -> tuple[str, ...]:
    """The field ``name``'s list of paths, each one as :func:`path_problem`
    wants it; ValueError names the field."""
    if not isinstance(values, list) or (non_empty and not values):
        raise ValueError(f"{name} must be a {'non-empty ' if non_empty else ''}list of paths")
    for p in values:
        if why := path_problem(p):
            raise ValueError(f"{name}: {why}")
    if distinct and len(set(values)) != len(values):
        raise ValueError(f"{name} names a path twice")
    return tuple(values)
