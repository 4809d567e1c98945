PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m bench.demo

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check gitwal tests bench
	$(BIN)/mypy gitwal

clean:
	rm -rf $(VENV) build *.egg-info
