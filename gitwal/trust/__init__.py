"""What a record may authorize here (docs/security.md, "Authority").

authority.py   the one check every command that acts on a record asks: written
               by this clone (its MAC), signed by a key the user trusts, or data
signatures.py  signature checks of append commits against the trusted keys
               (the authority check, `git wal verify`, server-side hooks)
"""
