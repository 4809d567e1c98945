"""A power-loss crash-state checker for gitwal, in the spirit of ALICE (OSDI '14).

No FUSE, no kernel module: a workload runs once under ``strace``; the trace is
turned into logical file-system operations (:mod:`.trace`); a persistence
model decides, for a crash after the k-th operation, which operations a
barrier (fsync) made durable and which may be lost, reordered or torn
(:mod:`.model`); each crash state is built in memory over a copy of the
repository taken before the run (:mod:`.image`) and written to a fresh
directory (:mod:`.replay`), where the real ``git wal recover`` runs and the
agent finishes its task (:mod:`.check`). docs/crash-states.md describes the
model and the invariants.
"""
