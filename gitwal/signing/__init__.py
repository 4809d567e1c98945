"""Signed appends: keys, the SSH signature format, trusted signers, and the
checks of signed append commits (docs/security.md)."""
