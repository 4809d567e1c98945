"""What every layer stands on; imports nothing else of gitwal.

ids.py          distinct types for run ids, LSNs and object ids
errors.py       WalError (message, hint, exit code) and its kinds
durable.py      every durable file write by path (temp file, fsync, rename, fsync of the directory)
durable_at.py   the same in the working tree, by directory descriptor, never through a symlink
repository.py   opening the repository and its working tree as git does
crashpoints.py  the named points the crash tests kill gitwal at
seconds.py      a number of seconds a person or caller gave, checked once
display.py      any path or logged string made safe for a terminal
progress.py     one status line on a terminal for long work
userconfig.py   the per-user directory of the signing key and allowed signers
version.py      the version string
"""
