"""The log layer: a run's records as a chain of commits under refs/wal/<run>.

store.py          the one writer of refs/wal/*: appends by compare-and-swap
groupcommit.py    a step's commit held back to ride in the next append
chain.py          reads a run's chain back, newest first, checking its links
chaincheck.py     the rules a chain obeys: plan or checkpoint first, dense LSNs, closings
forward.py        the walk that reads a chain oldest first, holding ids, not records
readcache.py      what a process keeps of the runs it read, by commit id
appends.py        reads one append commit: its records, decoded and checked
segments.py       the tolerant reader that names what is damaged
packwrite.py      each append's objects as one kept pack (gc cannot take them)
packmerge.py      merges those packs by size tier, copying entries as stored
keepalive.py      which loose objects an append must carry into its pack
rewrite.py        compaction: a new chain, the old one archived
repair.py         cuts a damaged log back to its newest intact append
locks.py          the run lock; command_locks.py, one lock per shell step
runs.py           which runs a repository holds; a run's records across archives
authorship.py     whose command a record carries (only this clone's run)
replica.py        the Replica protocol the store is handed (remote/replicate.py)
"""
