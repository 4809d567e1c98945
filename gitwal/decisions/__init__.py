"""What a person decides about a run (or a harness on their behalf).

undo.py       `git wal undo`/`redo`: committed steps given back or done again
resolve.py    `git wal resolve`: a step in doubt closed by a person
approvals.py  `exec --irreversible` and `git wal approve`: one run of a command, approved
claiming.py   `git wal claim`/`release`: a run's claim records appended
"""
