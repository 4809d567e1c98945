"""Recovery: for every open intent, did it land, and what must be repaired.

scan.py    one pass over the segment: what recovery reads of it (no records held)
decide.py  the decision table and the recovery pass (docs/recovery.md)
files.py   the decisions for file tools
shell.py   the decisions for shell steps
host.py    what those two need from the recovery pass
elsewhere.py  other runs' committed steps since this run's last: landed steps, the prompt
report.py  the recovery report as data (outcomes, drift, committed steps; --json)
prompt.py  the resume prompt, rendered only from the report
redo.py    the one-line `git wal` command that performs a logged step again
resume.py  `git wal resume`: a run taken over from its remote into this clone
materialize.py  the tree at a run's last committed step, refused over work not in HEAD
"""
