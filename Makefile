# One-command set-up: every target creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The test dependencies' versions the suite last passed with (.ci/constraints.txt says why).
CONSTRAINTS := .ci/constraints.txt
SYSTEM_STAMP := $(VENV)/.system-packages
# Real peers the tests compare against (openssl: s_client drives TLS 1.3 suites in tests/capture/test_live_tls.py); tests that need a missing one skip with a loud reason.
SYSTEM_PACKAGES := tshark kcat openssl
# Sarama (Go), the client tests/interop/test_sarama.py builds: Debian's Go, its packaged Sarama, and
# xdg-go/scram for Sarama's SCRAM.
GO_PACKAGES := golang-go golang-github-shopify-sarama-dev golang-github-xdg-go-scram-dev
GO_SOURCES := /usr/share/gocode/src/github.com/Shopify/sarama /usr/share/gocode/src/github.com/xdg-go/scram
# KafkaJS, the Node.js client tests/interop/test_kafkajs.py runs, installed with npm under .venv/node.
NODE_STAMP := $(VENV)/.node-packages
NODE_PACKAGES := kafkajs@2.2.4

.PHONY: install run test test-toolkit lint bench clean constraints

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(CONSTRAINTS) | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' -c $(CONSTRAINTS)
	touch $(STAMP)

$(SYSTEM_STAMP): | $(PY)
	@missing=""; for p in $(SYSTEM_PACKAGES); do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	{ $(foreach d,$(GO_SOURCES),[ -d $(d) ] &&) command -v go >/dev/null; } || missing="$$missing $(GO_PACKAGES)"; \
	if [ -z "$$missing" ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q $$missing >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $$missing >/dev/null 2>&1; } || \
	  echo "WARNING: could not install$$missing; the tests that need them will skip"; \
	else echo "WARNING: no apt-get or not root; missing$$missing; the tests that need them will skip"; fi
	touch $(SYSTEM_STAMP)

$(NODE_STAMP): | $(PY)
	@if command -v npm >/dev/null; then \
	  npm install --prefix $(VENV)/node --no-save --no-audit --no-fund --silent $(NODE_PACKAGES) || \
	  echo "WARNING: npm could not install $(NODE_PACKAGES); the KafkaJS tests will skip"; \
	else echo "WARNING: no npm; the KafkaJS tests will skip"; fi
	touch $(NODE_STAMP)

install: $(STAMP) $(SYSTEM_STAMP) $(NODE_STAMP)

run: $(STAMP)
	$(VENV)/bin/kafkapy serve

lint: $(STAMP)
	$(VENV)/bin/ruff check kafkapy tests benchmarks examples
	$(VENV)/bin/mypy

# Bytecode first: where PYTHONDONTWRITEBYTECODE is set (as on this project's machines), every
# process the tests start (kafkapy serve, the CLI, the examples) would otherwise compile kafkapy
# from source again, about 0.6 s each (tests/commands: 138 s -> 94 s).
test: install lint
	$(PY) -m compileall -q kafkapy tests benchmarks examples
	$(PY) -m pytest

# Issue 18's tests in one process, held to their 30 s wall-time budget (docs/testing.md);
# TOOLKIT_BUDGET_S=45 make test-toolkit on a shared machine.
test-toolkit: install
	$(PY) tests/toolkit_budget.py

bench: $(STAMP)
	$(PY) -m benchmarks

# After upgrading a dependency in .venv and passing 'make test' with it.
constraints: $(STAMP)
	{ sed -n '1,3p' $(CONSTRAINTS); $(PY) -m pip freeze --exclude-editable; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
