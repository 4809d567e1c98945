"""The one shape of a `git push` that moves a ref on a remote, and the reading
of git's answer per ref (docs/remote-runs.md): `git wal push`, the pusher, a
takeover and the claims all build their pushes here.

Invariant: no refspec carries ``+`` and no lease is bare. An update either
names the value the remote's ref must hold now (``--force-with-lease=<ref>:<oid>``,
or ``<ref>:`` with nothing: the ref must not exist), or names none, and then
git itself refuses anything that is not a fast-forward. A deletion always
names the value it deletes. A bare ``--force-with-lease`` would compare with
a remote-tracking ref that any fetch moves: a lock that is not one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .refs import RefOutcome

__all__ = ["LANDED", "Update", "porcelain", "push_args"]

LANDED = ("created", "updated", "up-to-date")  # the remote's ref holds what was pushed

_PUSHED = {"*": "created", " ": "updated", "+": "compacted", "=": "up-to-date",
           "!": "rejected", "-": "deleted"}


@dataclass(frozen=True)
class Update:
    """One ref to move on the remote: to ``src`` (a local object or ref; None
    deletes it), from ``expected`` (its value there now; "" for none; None
    for "any value this is a fast-forward of")."""

    ref: str
    src: str | None
    expected: str | None

    def __post_init__(self) -> None:
        if self.src is None and not self.expected:
            raise ValueError(f"deleting {self.ref} needs the value it deletes")
        if self.ref.startswith("+") or (self.src or "").startswith("+"):
            raise ValueError(f"a forced update of {self.ref}")


def push_args(remote: str, updates: Sequence[Update], *, atomic: bool = False) -> list[str]:
    """`git push` arguments (after ``git``) for ``updates``, none of them forced."""
    args = ["push", "--porcelain", "--no-follow-tags", "--recurse-submodules=no"]
    if atomic:
        args.append("--atomic")
    args += [f"--force-with-lease={u.ref}:{u.expected}" for u in updates
             if u.expected is not None]
    return [*args, remote, *[f"{u.src or ''}:{u.ref}" for u in updates]]


def porcelain(stdout: str) -> dict[str, RefOutcome]:
    """`git push --porcelain` lines: ``<flag>\\t<src>:<dst>\\t<summary>``."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or len(parts[0]) != 1 or ":" not in parts[1]:
            continue
        dst = parts[1].split(":", 1)[1]
        status = _PUSHED.get(parts[0], "rejected")
        out[dst] = RefOutcome(dst, status, parts[2].strip() if status != "up-to-date" else "")
    return out
