"""Regression cases: crash states saved as JSON, replayable on a fresh trace.

Operation indices change whenever gitwal (or git, or libgit2) issues one more
syscall, so a case names operations by *signature* (the operation's
description with random temp-file names wildcarded) and occurrence number:

.. code-block:: json

    {
      "name": "...", "workload": "mixed", "model": "conservative",
      "crash": {"after": "rename .git/refs/wal/mixed.lock -> .git/refs/wal/mixed",
                "occurrence": 9, "then": "fsync .git/refs/wal"},
      "survivors": [{"op": "create out/b.txt", "occurrence": 1}],
      "torn": null,
      "diagnosis": "...", "fix": "..."
    }

``crash`` is ``{"after": sig, "occurrence": n}`` (power lost right after the
n-th operation with that signature) or ``{"before": ...}``; an optional
``"then": sig2`` moves the point to the first ``sig2`` after it (e.g. the
directory fsync that follows the n-th ref update, however many fsyncs an
append issues). ``survivors`` lists the unpersisted operations that reach the
disk (all others are lost); ``lost``, used instead, lists the ones that do
not (all others survive). An operation the current trace persists at the
crash point survives whatever the case says, and one the trace no longer
issues is skipped, so a fix that adds the missing barrier (or removes the
offending write) makes the case pass; a crash point the trace no longer has
is an error: the case must be updated.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import CrashState, Model, Torn
from .ops import Op

_RANDOM = [
    (re.compile(r"tmp_object_git2_[0-9a-f]+"), "tmp_object_git2_*"),
    (re.compile(r"tmp_objdir-bulk-fsync-[0-9A-Za-z]+"), "tmp_objdir-bulk-fsync-*"),
    (re.compile(r"tmp_obj_[0-9A-Za-z]+"), "tmp_obj_*"),
    (re.compile(r"bulk_fsync_[0-9A-Za-z]+"), "bulk_fsync_*"),
]


def signature(op: Op) -> str:
    text = op.describe()
    for pattern, repl in _RANDOM:
        text = pattern.sub(repl, text)
    return text


class CaseError(Exception):
    """The case does not match the trace any more."""


@dataclass(frozen=True)
class Case:
    path: Path
    name: str
    workload: str
    model: str
    spec: dict[str, Any]

    @property
    def diagnosis(self) -> str:
        return f"{self.spec.get('diagnosis', '')}\nsuggested fix: {self.spec.get('fix', '')}"


def load(path: Path) -> Case:
    spec = json.loads(path.read_text())
    return Case(path, spec["name"], spec["workload"], spec.get("model", "conservative"), spec)


class Index:
    """Signature + occurrence -> operation index, for one trace."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.where: dict[str, list[int]] = defaultdict(list)
        for j, op in enumerate(ops):
            self.where[signature(op)].append(j)

    def find(self, sig: str, occurrence: int) -> int:
        found = self.where.get(sig, [])
        if not 1 <= occurrence <= len(found):
            raise CaseError(f"the trace has {len(found)} op(s) {sig!r}, "
                            f"not an occurrence {occurrence}")
        return found[occurrence - 1]

    def name(self, ops: Sequence[Op], j: int) -> dict[str, Any]:
        sig = signature(ops[j])
        return {"op": sig, "occurrence": self.where[sig].index(j) + 1}


def resolve(case: Case, model: Model) -> CrashState:
    index = Index(model.ops)
    spec = case.spec["crash"]
    where = "after" if "after" in spec else "before"
    j = index.find(spec[where], spec.get("occurrence", 1))
    if "then" in spec:
        later = [k for k in index.where.get(spec["then"], []) if k > j]
        if not later:
            raise CaseError(f"no {spec['then']!r} after {spec[where]!r}")
        j = later[0]
    crash = j + 1 if where == "after" else j
    unpersisted = set(model.unpersisted(crash))

    def ops(key: str) -> set[int]:
        found = set()
        for item in case.spec.get(key, []):
            if item["op"] not in index.where:
                continue  # no longer issued: nothing to keep or lose
            k = index.find(item["op"], item.get("occurrence", 1))
            if k >= crash:
                raise CaseError(f"{item} comes after the crash point")
            found.add(k)
        return found

    # "lost": everything else survives; "survivors": everything else is lost
    lost = "lost" in case.spec
    survivors = unpersisted - ops("lost") if lost else unpersisted & ops("survivors")
    torn = None
    if case.spec.get("torn"):
        t = case.spec["torn"]
        j = index.find(t["op"], t.get("occurrence", 1))
        if j in unpersisted:
            survivors.add(j)
            torn = Torn(j, t["kind"])
    return CrashState(crash, model.close(frozenset(survivors), crash), torn, case.name)


def describe(state: CrashState, model: Model) -> dict[str, Any]:
    """The JSON form of a state (for writing a new case)."""
    index = Index(model.ops)
    ops = model.ops
    out: dict[str, Any] = {
        "crash": {"after": signature(ops[state.crash - 1]),
                  "occurrence": index.name(ops, state.crash - 1)["occurrence"]},
        "survivors": [index.name(ops, j) for j in sorted(state.survivors)],
        "torn": None,
    }
    if state.torn is not None:
        out["torn"] = {**index.name(ops, state.torn.op), "kind": state.torn.kind}
    return out
