"""Records: what a log holds, and how it is written down.

model.py        the frozen dataclasses of every record and their constants
codec.py        a record to bytes and bytes to a record (the only encoder)
validate.py     what a decoded record must satisfy before anything trusts it
intent_args.py  what an intent may ask: a known tool, its arguments' shape
paths.py        the paths a record may name: normalised, in the tree, never .git
rows.py         the rows of `git wal log --json`: each intent with its status

docs/format.md is the normative description of the fields.
"""
