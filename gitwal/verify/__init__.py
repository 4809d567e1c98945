"""`git wal verify`: do the run logs prove what happened? (docs/verify.md)

The verifier reads git objects only -- no working tree, no lock -- so CI can
run it in a fresh clone or a bare mirror. A run is loaded once (every
segment, read past its defects, see log/segments.py); then each :class:`Check`
in turn yields failures over the loaded run:

* ``closing``: commit/abort records close earlier intents, once each;
* ``intent``: file tools replay from their pre-images to their post ids;
* ``objects``: every named object is present and kept alive by the chain;
* ``checkpoint``: checkpoint fields and trees follow from the log;
* ``among``: what a shell step's closing names as other runs' steps
  (``theirs``) or claims (``claimed``) is in those runs' logs (shell_among.py);
* ``branch``: the branch's diff from the base is explained by the log;
* ``signature``: append signatures verify and come from trusted keys
  (trust/signatures.py; with an allowed-signers file or ``require_signed``);
* ``seal``: seals are last, link to the append they follow and name the tree
  the log explains; with ``require_sealed`` every run ends in one
  (verify/seal.py).

Extension point: a check is any :class:`Check` object; it finds the append
commits, and so their signatures, in ``RunContext.segments``.

run_checks.py  the verification of a selection of runs, and its report
session.py     each run's log read once per verification, and its plan
checks.py      the checks in order, what each sees, what the caller asked for
closing.py     the closing check
replay.py      the intent check (replays each file tool), and what the checks share
objects.py     the objects check
checkpoints.py the checkpoint checks
branch.py      the branch check: the branch's diff is explained by the log
runs_order.py  the order check: one order of every run's steps (--all)
seal.py        the seal check
"""

from ..log.segments import Failure
from .checks import DEFAULT_CHECKS, Check, Options, RunContext
from .run_checks import Report, RunResult, verify

__all__ = ["DEFAULT_CHECKS", "Check", "Failure", "Options", "Report", "RunContext",
           "RunResult", "verify"]
