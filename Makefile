PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-agents test check lint bench torture crash-states tools agent-clis clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m bench.demo

demo-agents: $(STAMP)
	$(BIN)/python -m bench.demo_agents

# Test processes (pytest-xdist), one per core by default. `loadgroup` keeps the
# tests of an xdist_group (a module-scoped fixture costly to build) in one process.
JOBS ?= auto
# Exit status 5 is "no tests collected" (e.g. a -k that matches nothing): not a failure.
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider -n $(JOBS) --dist loadgroup

# The whole suite, as CI runs it.
test: $(STAMP) lint tools agent-clis
	$(PYTEST); rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

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
# (signature interop tests). Installed only when missing.
tools:
	@command -v strace >/dev/null && command -v ssh-keygen >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq strace openssh-client)

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
	rm -rf $(VENV) build *.egg-info
