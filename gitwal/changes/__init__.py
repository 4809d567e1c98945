"""What a step changes, as pure facts over the log and the tree.

tools.py    end-state tools as pure functions: (pre-images, args) -> post-images
effects.py  applying, checking and undoing one step's effect on the tree
commands.py running a step's commands (check, exec command, confirm probe), under a time limit
history.py  what each committed step changed; which steps are in effect
ledger.py   what the log says each path should hold now (the one fold)
"""
