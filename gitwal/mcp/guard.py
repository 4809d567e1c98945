"""The `exec` calls the model may not make, refused before anything is logged or run."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import pygit2

from ..base.errors import ToolRefused
from ..shellwords.guard import refusal as guard_refusal
from ..shellwords.match import first_match
from ..shellwords.unwrap import aliases_of


def refuse_agent_only(repo: pygit2.Repository, argv: Sequence[str]) -> None:
    """An `exec` the model may not run (docs/security.md, "What an agent's tool call
    cannot do"): a person's decision or a change of gitwal's settings, read as the
    agents' hooks read a shell call; and a `wal.irreversible` command, which this
    server cannot put to the user (nothing is logged or run)."""
    line = shlex.join(argv)
    entries = [(str(e.name), e.value) for e in repo.config]
    aliases = aliases_of(entries)
    if why := guard_refusal(line, aliases):
        raise ToolRefused(f"exec: {why}", "this is a person's to do: ask the user to run it "
                          "themselves, in their own terminal")
    patterns = tuple(str(v) for name, v in entries
                     if name.lower() == "wal.irreversible" and v and str(v).strip())
    if hit := first_match(line, patterns, aliases):
        raise ToolRefused(f"exec: `{line[:200]}` is irreversible here ({hit.why}) and needs "
                          "a person's approval, which this server cannot ask for",
                          "ask the user to run it with `git wal exec --irreversible` and "
                          "`git wal approve LSN`")
