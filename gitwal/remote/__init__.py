"""Run logs on remotes: `git wal push`, `git wal fetch`, `git wal remote setup`,
and each append replicated as it is written (`wal.remote`).

setup.py        the commands' entry points and `remote setup`
cas_push.py     the one shape of a push that moves a remote ref: compare-and-swap, never forced
push.py         sends logs (secret_scan.py refuses secrets first)
fetch.py        brings logs in, checked before any local ref moves
refs.py         the vocabulary both share: refspecs, outcomes, git calls
checks.py       the chain checks a fetched log must pass
replicate.py    every append handed on to the run's remote as it is written
push_heads.py   one push of the runs' newest heads, never forced (compacted runs: push.py's way)
pusher.py       the background pusher: one per clone and remote, batching appends
replica_state.py  what replication keeps per run: remote, head seen there, last error
takeover.py     `git wal resume`'s part here: fetch the run, push the takeover by compare-and-swap
fence.py        a clone that saw the run go on elsewhere (its push refused) stops writing it
claim_refs.py   claims on a remote as refs: their name, their blob, this clone's copy of them
claim_push.py   claims taken and given back on a remote, by compare-and-swap; their fetch
claim_seen.py   what this clone saw of a remote's claims and when, by its clock: their expiry
"""
