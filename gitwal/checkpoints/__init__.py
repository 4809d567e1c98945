"""Where the log meets the branch.

checkpoint.py     checkpoints (ordinary commits), compaction, the gate, `drop`
branch_commit.py  a checkpoint's commit on the user's branch, the user's index carried
seal.py           `git wal seal`: a run ended with a signed seal
"""
