"""The seal checks of `git wal verify` (docs/verify.md, docs/format.md "seal").

* ``chain``: nothing follows a seal;
* ``seal``: a seal names the append it follows (``head``, holding ``last``),
  its append is signed, and its ``tree`` is what the log explains: the
  newest checkpoint's tree (else the base commit's) plus the committed steps
  and ``unlogged`` records since, exactly as `git wal seal` computed it;
* with ``require_sealed``: the run's last record is a seal. A log whose
  newest appends were cut off is a valid, shorter chain; the missing seal is
  the only trace of the cut.

Whether the seal's signature is valid and trusted is the ``signature``
check's job (trust/signatures.py), which every append goes through.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
from pygit2.enums import ObjectType

from ..base.ids import TreeId
from ..changes.ledger import Rules, fold
from ..checkpoints.seal import tree_problems
from ..log.segments import Append, Entry, Failure, Segment, object_kind
from ..records.model import Checkpoint, Plan, Seal, type_name
from ..signing.commits import commit_signature
from .replay import MAX_PATHS, TreeView

NOT_SEALED = "run not sealed: the tail may have been cut"


@dataclass(frozen=True)
class SealCheck:
    """What the seal checks found: failures, and notes on what they could not check."""

    failures: list[Failure]
    notes: list[str]


def seal_failures(repo: pygit2.Repository, run: str, segments: list[Segment],
                  history: list[Entry], plan: Plan | None, require_sealed: bool,
                  signatures_checked: bool) -> SealCheck:
    out: list[Failure] = []
    notes: list[str] = []
    appends = {a.oid: a for seg in segments for a in seg.appends}
    for i, entry in enumerate(history):
        rec = entry.record
        if not isinstance(rec, Seal):
            continue
        if i + 1 < len(history):
            after = [e.record.lsn for e in history[i + 1:]]
            span = str(after[0]) if len(after) == 1 else f"{after[0]}..{after[-1]}"
            out.append(Failure(run, "chain", f"records after the seal at LSN {rec.lsn}: LSN "
                               f"{span} (nothing may follow a seal)", after[0]))
        reasons = _link_problems(rec, appends.get(entry.commit), appends)
        reasons += _tree_reasons(repo, rec, history[:i], notes)
        out += [Failure(run, "seal", r, rec.lsn) for r in reasons]
    last = history[-1].record if history else None
    if require_sealed and last is not None and not isinstance(last, Seal):
        out.append(Failure(run, "seal", f"{NOT_SEALED} (the log ends with the "
                           f"{type_name(last)} record at LSN {last.lsn})", last.lsn))
    if isinstance(last, Seal) and not signatures_checked:
        notes.append("the seal's signature was not checked: pass --allowed-signers")
    return SealCheck(out, notes)


def _link_problems(seal: Seal, own: Append | None, appends: dict[str, Append]) -> list[str]:
    """The seal follows ``head``, which holds ``last``; its append is signed."""
    if own is None:
        return []  # not read (the chain check said why)
    out = []
    parents = [str(p) for p in own.commit.parent_ids]
    if parents != [seal.head]:
        follows = f"follows {parents[0][:12]}" if parents else "is the root of its chain"
        out.append(f"seal names head {seal.head[:12]}, but its append {own.oid[:12]} {follows}")
    else:
        head = appends.get(seal.head)
        if head is not None and seal.last not in {e.record.lsn for e in head.entries}:
            out.append(f"seal names head {seal.head[:12]}, which does not hold LSN {seal.last}")
    if len(own.entries) > 1:
        out.append(f"the seal shares its append {own.oid[:12]} with other records "
                   "(gitwal appends a seal alone)")
    if commit_signature(own.commit)[0] is None:
        out.append(f"the seal's append {own.oid[:12]} is not signed (gitwal signs every seal)")
    return out


def _tree_reasons(repo: pygit2.Repository, seal: Seal, before: list[Entry],
                  notes: list[str]) -> list[str]:
    """The sealed tree against the state the records since the newest checkpoint leave."""
    if object_kind(repo, seal.tree) != ObjectType.TREE:
        return []  # the objects check names a missing or mistyped tree
    start = max((i for i, e in enumerate(before) if isinstance(e.record, Checkpoint)),
                default=0)
    records = [e.record for e in before[start:]]
    trees = TreeView(repo)
    ledger = fold(trees, records, Rules(unlogged=True, lenient=True))
    if ledger.base is None:
        notes.append(f"the tree of seal LSN {seal.lsn} was not compared: the tree it starts "
                     "from (base commit or checkpoint) is missing")
        return []
    found = tree_problems(trees, ledger, TreeId(seal.tree))
    if len(found) > MAX_PATHS:
        found[MAX_PATHS:] = [f"... and {len(found) - MAX_PATHS} more path(s) that differ"]
    return [f"its tree {seal.tree[:12]}: {p}" for p in found]
