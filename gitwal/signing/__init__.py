"""Signed appends: keys, the SSH signature format, trusted signers, and the
checks of signed append commits (docs/security.md), which trust/signatures.py
makes.

sshwire.py          SSH wire encoding and public key blobs
sshsig.py           SSH signatures (OpenSSH PROTOCOL.sshsig): sign, verify, armor
keys.py             Ed25519 signing keys in OpenSSH format, mode 0600, outside every repository
allowed_signers.py  git's allowed-signers file: who is trusted, for what, until when
add_signer.py       a trusted key added to an allowed-signers file (`git wal trust add`)
trust.py            where keys and trust live; `git wal keygen` and `trust`
commits.py          signed git commits, as `git commit -S` writes them with gpg.format=ssh
signer.py           the signer the log layer is handed, its key loaded on first use
errors.py           the failures of keys, trust and signatures
"""
