PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench torture crash-states tools clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m bench.demo

test: $(STAMP) lint tools
	$(BIN)/python -m pytest -q -p no:cacheprovider; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check gitwal tests bench
	$(BIN)/mypy gitwal bench

# Debian packages the suite uses: strace (crash-state checker), ssh-keygen
# (signature interop tests). Installed only when missing.
tools:
	@command -v strace >/dev/null && command -v ssh-keygen >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq strace openssh-client)

bench: $(STAMP)
	$(BIN)/python -m bench.run

torture: $(STAMP)
	GITWAL_TORTURE_KILLS=2000 $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_torture.py

crash-states: $(STAMP) tools
	GITWAL_CRASH_STATES=all $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_crash_states.py

clean:
	rm -rf $(VENV) build *.egg-info
