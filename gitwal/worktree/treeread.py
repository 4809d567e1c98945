"""What a path holds in a git tree, read by walking the tree's entries, the
last trees read kept by id (a tree's id is its content, so any repository's
copy will do).
"""

from __future__ import annotations

from collections import OrderedDict

import pygit2

from ..base.ids import ABSENT


def tree_state(repo: pygit2.Repository, tree_id: str, path: str) -> str:
    """The object id ``path`` has in a tree, or ABSENT (also where the tree
    has a directory there: as for git, the file is absent)."""
    *dirs, name = path.split("/")
    for part in dirs:
        entry = _entries(repo, tree_id).get(part)
        if entry is None or not entry[1]:
            return ABSENT
        tree_id = entry[0]
    entry = _entries(repo, tree_id).get(name)
    return ABSENT if entry is None or entry[1] else entry[0]


_TREES: OrderedDict[str, dict[str, tuple[str, bool]]] = OrderedDict()
_TREES_KEPT = 64


def _entries(repo: pygit2.Repository, tree_id: str) -> dict[str, tuple[str, bool]]:
    """A tree's entries by name (object id, whether a tree), the last
    :data:`_TREES_KEPT` trees read kept by id (a tree's id is its content, so
    any repository's copy will do). Looking a path up in libgit2 parses each
    directory on the way again (its object cache is off, gitwal.base.repository's
    bound_memory): the paths of one shell step that wrote 4,000 files into one
    directory cost O(paths^2) that way, a minute for verify."""
    got = _TREES.get(tree_id)
    if got is not None:
        _TREES.move_to_end(tree_id)
        return got
    tree = repo[tree_id]
    assert isinstance(tree, pygit2.Tree)
    got = {e.name: (str(e.id), e.type_str == "tree") for e in tree if e.name is not None}
    _TREES[tree_id] = got
    if len(_TREES) > _TREES_KEPT:
        _TREES.popitem(last=False)
    return got
