# One-command set-up: every target creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/kafkapy demo

lint: $(STAMP)
	$(VENV)/bin/ruff check kafkapy tests benchmarks examples
	$(VENV)/bin/mypy

test: $(STAMP) lint
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
