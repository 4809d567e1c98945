"""Run logs on remotes: `git wal push`, `git wal fetch`, `git wal remote setup`.

setup.py        the commands' entry points and `remote setup`
push.py         sends logs (secret_scan.py refuses secrets first)
fetch.py        brings logs in, checked before any local ref moves
refs.py         the vocabulary both share: refspecs, outcomes, git calls
checks.py       the chain checks a fetched log must pass
"""
