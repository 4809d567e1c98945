"""How long `git wal order`'s derivation (gitwal/together/order.py) takes on many runs'
steps, in process, on synthetic lanes: runs taking random turns on 20 files,
one or two per step, 10 % of the steps putting back an earlier state (so many
steps share a pre-state), each step stamped with the second it committed in;
then the same with one stale read appended (a fork the search cannot place).

Run: ``python -m bench.order_scale``; prints one line per size.
"""

from __future__ import annotations

import hashlib
import random
import time

from gitwal.base.ids import Lsn
from gitwal.changes.history import Change
from gitwal.together.order import Step, derive

FILES = 20


def _h(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def lanes(runs: int, steps: int, fork: bool, seed: int = 1) -> tuple[list[list[Step]],
                                                                      dict[str, str]]:
    rnd = random.Random(seed)
    base = {f"f{i}": _h(f"base{i}") for i in range(FILES)}
    state = dict(base)
    out: dict[str, list[Step]] = {f"r{r}": [] for r in range(runs)}
    for n in range(runs * steps):
        run = f"r{rnd.randrange(runs)}"
        changes = []
        for p in rnd.sample(sorted(state), rnd.randint(1, 2)):
            after = _h(f"revert{p}") if rnd.random() < 0.1 else _h(f"{n}{p}")
            changes.append(Change(p, state[p], 0o100644, after))
            state[p] = after
        lane = out[run]
        lane.append(Step(run, Lsn(2 * len(lane) + 2), "write_file", tuple(changes), n))
    if fork:  # began from f0's base state, long replaced
        lane = out["r0"]
        lane.append(Step("r0", Lsn(2 * len(lane) + 2), "write_file",
                         (Change("f0", base["f0"], 0o100644, _h("stale")),), runs * steps))
    return list(out.values()), base


def main() -> None:
    for fork in (False, True):
        for runs, steps in ((2, 100), (8, 200), (8, 1000)):
            ls, base = lanes(runs, steps, fork)
            t0 = time.perf_counter()
            _ordered, conflicts = derive(ls, base.__getitem__)
            took = time.perf_counter() - t0
            print(f"{runs} runs x {steps} steps{' + 1 stale read' if fork else ''}: "
                  f"{took * 1000:.0f} ms, {len(conflicts)} conflict(s) "
                  f"{sorted({c.kind for c in conflicts})}")


if __name__ == "__main__":
    main()
