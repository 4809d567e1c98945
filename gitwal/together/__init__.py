"""What several runs share on one repository.

claims.py        paths a run reserves; other runs' steps on them refused or warned about
claimfold.py     a run's claims folded from its log, cached per head
remote_claims.py  other clones' claims from a remote: do they still hold, bear on a step, bind
pathlocks.py     one lock per path: one step of any run writes a path at a time
open_intents.py  other runs' open file intents on given paths
live_others.py   which other runs are live; which open steps a rollback leaves alone
shell_among.py   a shell step among other runs: what it notes, what it leaves to them
order.py         one order of every run's committed steps (`git wal order`)
schedule.py      the bounded search behind that order
schedule_state.py  what that search works on: path states, one point and its key
"""
