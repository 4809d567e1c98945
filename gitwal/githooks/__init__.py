"""Git hooks gitwal installs: install.py writes them; the scripts are package data."""
