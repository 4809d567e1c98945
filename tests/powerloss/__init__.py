"""Power-loss tests on a FUSE file system that forgets unsynced data (amnesiafs.py)."""
