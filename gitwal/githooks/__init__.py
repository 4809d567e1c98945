"""Git hooks gitwal installs: install.py writes them (or, where a hook manager
runs them, managers.py names the entry to add); the scripts are package data
(hooks/git/ of the source, gitwal._hooks in an installed gitwal)."""
