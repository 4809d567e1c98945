"""The working tree: every read and write gitwal makes there.

tree.py       content ids, reads, atomic writes and removals
confine.py    path confinement: each path reached one component at a time, no symlink
snapshot.py   what a shell step may change, saved before it runs
treeread.py   what a path holds in a git tree (trees kept by id)
diskform.py   a snapshot's blobs hold the bytes on disk, not git's converted form
overwrite.py  the first law: write over a path only if gitwal wrote it
restore.py    putting a shell step's paths back to their saved state
reshape.py    an undo's or redo's paths changing kind: the order, the up-front check
byname.py     fsync by name what others wrote, before a record says it is in place
secrets.py    which untracked files are secret-looking (kept out of snapshots)
secretfiles.py  secret-looking files a shell step's snapshots leave out, held in memory
"""
