"""Data, not code: every hook gitwal ships, one folder per host (installed as
gitwal._hooks; see pyproject.toml). Read with importlib.resources, never imported for code."""
