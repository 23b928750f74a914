# The two commands the README starts with: `make demo` and `make test`.
# Everything else they need is installed by the targets below, from PyPI and
# Maven Central, into .venv and ~/.cache/sparkmirror.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install setup tools unit lint clean dev-up dev-down bench

# `make bench`: the workload and the latency load; any of them can be set,
# e.g. `make bench BENCH_RECORDS=200000 BENCH_RUNS=1`. BENCH_ARGS takes any
# other option of bench/run.py (`--help` lists them).
BENCH_RECORDS ?= 1000000
BENCH_PARTITIONS ?= 8
BENCH_SIZE ?= 512
BENCH_RATE ?= 20000
BENCH_LATENCY_SECONDS ?= 60
BENCH_RUNS ?= 2
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.bench-installed

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Fetch Kafka's broker jars (dev clusters) and Kafka's MM2 client (tests) once (then offline).
setup: install
	$(BIN)/sparkmirror setup

demo: setup
	$(BIN)/sparkmirror demo

# Debian packages the tests need, installed when their command is missing (root, or sudo):
# promtool (package prometheus) validates the Prometheus alert rules in docs/ (tests/integration/test_alert_rules.py),
# systemd-analyze (package systemd) the systemd unit in deploy/ (tests/integration/test_systemd_verify.py).
# $(call apt_tool,COMMAND,PACKAGE)
apt_tool = command -v $(1) >/dev/null 2>&1 || { \
	SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	echo "installing $(1) (Debian package $(2))"; \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(2) >/dev/null \
	|| { $$SUDO apt-get update -q >/dev/null && \
	     $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(2) >/dev/null; }; }

tools:
	@$(call apt_tool,promtool,prometheus)
	@$(call apt_tool,systemd-analyze,systemd)

# Fastest tier first, so that a broken change fails in seconds.
# Two pytest workers, each with its own clusters and Spark session, a test file on one worker (its
# module's clusters shared): most of a test's time is a wait on Kafka or Spark, so two overlap
# (docs/decisions.md, "The test run on two workers").
test: setup tools lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=50 tests/unit tests/integration tests/e2e

unit: install
	$(BIN)/python -m pytest tests/unit

# The benchmark's harness (what `make bench` and the probes of record run) is type-checked too;
# the one-off probes in bench/ are linted, not yet typed.
BENCH_TYPED := bench/run.py bench/report.py bench/scale.py bench/proctree.py bench/replicators.py \
	bench/workload.py bench/sparkcluster.py bench/latency_probe.py bench/idle_flow.py bench/realtime_mode.py

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	$(BIN)/mypy $(BENCH_TYPED)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $(BENCH_STAMP)

# sparkmirror beside MirrorMaker 2 and the machine's limit: bench/results/<date>.json,
# BENCHMARKS.md and its chart. MM2's jars are fetched on the first run (then offline).
bench: setup $(BENCH_STAMP)
	$(BIN)/python bench/run.py --records $(BENCH_RECORDS) --partitions $(BENCH_PARTITIONS) --size $(BENCH_SIZE) \
		--rate $(BENCH_RATE) --latency-seconds $(BENCH_LATENCY_SECONDS) --runs $(BENCH_RUNS) $(BENCH_ARGS)

dev-up: setup
	$(BIN)/sparkmirror dev up

dev-down: install
	$(BIN)/sparkmirror dev down

clean:
	-$(BIN)/sparkmirror dev down
	rm -rf $(VENV) build *.egg-info src/*.egg-info
