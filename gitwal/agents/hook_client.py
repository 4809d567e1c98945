"""The fast path of the hook command (`git wal install`, launch.py): three lines.

Python compiles the script it is given on every start but imports modules
from their cached bytecode, so the client (client.py, imported from this
directory: the script's own directory is ``sys.path[0]``, and framing.py,
which it imports from there) costs no compile per hook call.
"""

import sys

import client  # type: ignore[import-not-found]  # this directory, not the gitwal package

sys.exit(client.main(sys.argv[1:]))
