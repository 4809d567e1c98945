"""Git hooks gitwal installs: install.py writes them; the scripts are package data
(hooks/git/ of the source, gitwal._hooks in an installed gitwal)."""
