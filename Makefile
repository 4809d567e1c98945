PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The lock: every package the project's own runs install, pinned with hashes
# (make lock writes it from pyproject.toml and requirements.in). Users who
# `pip install gitwal` get pyproject's ranges instead.
LOCK := requirements.txt
LATEST := .venv-latest
LOWEST := .venv-lowest

.PHONY: demo demo-agents test test-latest test-lowest check lint lock bench torture crash-states tools \
	agent-clis clean

# Exactly the lock, hashes checked, then gitwal itself without dependencies (its
# build backend, setuptools, comes from the lock too: no unpinned download).
# -qq: the build backend's warnings about the hooks/ layout are noise here;
# errors still print.
$(STAMP): pyproject.toml $(LOCK)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -qq --require-hashes --no-deps -r $(LOCK)
	$(BIN)/pip install -qq --no-deps --no-build-isolation -e .
	@$(BIN)/pip check >/dev/null || { $(BIN)/pip check; \
		echo "error: $(LOCK) does not satisfy pyproject.toml" >&2; \
		echo "hint: run 'make lock' and commit $(LOCK)" >&2; exit 1; }
	touch $(STAMP)

# Refresh the lock: the newest releases pyproject's ranges allow, for every
# Python the project supports (one universal resolution), with hashes.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml requirements.in --extra test --universal \
		--python-version 3.11 --generate-hashes --quiet -o $(LOCK)

demo: $(STAMP)
	$(BIN)/python -m bench.demo

demo-agents: $(STAMP)
	$(BIN)/python -m bench.demo_agents

# Test processes (pytest-xdist), one per core by default. `loadgroup` keeps the
# tests of an xdist_group (a module-scoped fixture costly to build) in one process.
JOBS ?= auto
# Every `git wal` a test starts imports gitwal: with PYTHONDONTWRITEBYTECODE set
# (as in this project's CI environment) nothing is cached and each one compiles
# gitwal's modules again, ~140 ms a process. The test run keeps bytecode in
# .cache/pycache instead (the tree stays clean).
TESTENV := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/.cache/pycache
# Exit status 5 is "no tests collected" (e.g. a -k that matches nothing): not a failure.
PYTEST := $(TESTENV) $(BIN)/python -m pytest -q -p no:cacheprovider -n $(JOBS) --dist loadgroup

# The whole suite, as CI runs it.
test: $(STAMP) lint tools agent-clis
	$(PYTEST); rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

# The lower bounds of pyproject.toml, checked: the oldest release each range
# allows (its own dependencies newest), then `make check` on them.
test-lowest: $(STAMP)
	rm -rf $(LOWEST)
	$(BIN)/uv pip compile pyproject.toml --extra test --resolution lowest-direct \
		--python-version 3.11 --quiet -o $(LOWEST).txt
	$(PY) -m venv $(LOWEST)
	$(LOWEST)/bin/pip install -qq --no-deps -r $(LOWEST).txt
	$(LOWEST)/bin/pip install -qq --no-deps -e .
	$(LOWEST)/bin/pip check
	touch $(LOWEST)/.installed
	$(MAKE) check VENV=$(LOWEST)

# Not a gate: the whole suite on the newest releases pyproject's ranges allow,
# in a venv of its own, to see an upstream release break gitwal before a lock
# refresh does (docs/development.md).
test-latest:
	rm -rf $(LATEST)
	$(PY) -m venv $(LATEST)
	$(LATEST)/bin/pip install -qq --upgrade pip
	$(LATEST)/bin/pip install -qq --upgrade -e '.[test]'
	touch $(LATEST)/.installed
	$(LATEST)/bin/pip list --format=freeze > $(LATEST)/versions.txt
	$(MAKE) test VENV=$(LATEST)

# The inner loop: lint, types and every test not marked `slow` (no kills,
# crash states, torture or end-to-end runs).
check: $(STAMP) lint
	$(PYTEST) -m 'not slow'; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check gitwal tests bench
	$(BIN)/mypy gitwal bench tests
	$(BIN)/python -m gitwal.agents.plugin_client --check
	$(BIN)/python -m gitwal.cli.manpage --check
	$(BIN)/python -m gitwal.mcp.schemas --check

# Debian packages the suite uses: strace (crash-state checker), ssh-keygen
# (signature interop tests), fuse3 (libfuse3 and fusermount3 for the power-loss
# tests' FUSE file system), git-lfs (the Git LFS tests of line-ending and
# filter conversion, tests/test_line_endings.py), lighttpd (the web server in
# front of git's smart HTTP, `git http-backend`, for the remote tests:
# tests/gitservers.py). Installed only when missing.
tools:
	@command -v strace >/dev/null && command -v ssh-keygen >/dev/null && \
		command -v fusermount3 >/dev/null && command -v git-lfs >/dev/null && \
		command -v lighttpd >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq strace openssh-client fuse3 git-lfs \
			lighttpd)

# The pinned agent CLIs (Claude Code, Codex, Gemini CLI) for tests/e2e
# (docs/e2e.md), under .cache/; without npm the end-to-end tests skip, saying why.
agent-clis: $(STAMP)
	$(BIN)/python -m tests.e2e.pinned

bench: $(STAMP) agent-clis
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.claude_session

torture: $(STAMP)
	GITWAL_TORTURE_KILLS=2000 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_torture.py
	GITWAL_PERSON_CASES=1000 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_person_edits.py
	GITWAL_MANY_AGENTS_CASES=20 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_many_agents.py

crash-states: $(STAMP) tools
	GITWAL_CRASH_STATES=all $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_crash_states.py

clean:
	rm -rf $(VENV) $(LATEST) $(LOWEST) $(LOWEST).txt build *.egg-info
