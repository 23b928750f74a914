# The two commands the README starts with: `make demo` and `make test`.
# Everything else they need is installed by the targets below, from PyPI and
# Maven Central, into .venv and ~/.cache/sparkmirror.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install setup unit lint clean dev-up dev-down

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Fetch Kafka's broker jars and Spark's Kafka connector once (then offline).
setup: install
	$(BIN)/sparkmirror setup

demo: setup
	$(BIN)/sparkmirror demo

# Fastest tier first, so that a broken change fails in seconds.
test: setup lint
	$(BIN)/python -m pytest tests/unit tests/integration tests/e2e

unit: install
	$(BIN)/python -m pytest tests/unit

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/mypy

dev-up: setup
	$(BIN)/sparkmirror dev up

dev-down: install
	$(BIN)/sparkmirror dev down

clean:
	-$(BIN)/sparkmirror dev down
	rm -rf $(VENV) build *.egg-info src/*.egg-info
