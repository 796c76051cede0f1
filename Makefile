# The verbs a newcomer needs. `make run` and `make test` do all the set-up themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
ZK_JAR := /usr/share/java/zookeeper.jar
PYTEST_ARGS ?=
SEEDS ?= 100000

.PHONY: run test lint format bench sim sim-logs openapi setup zookeeper clean

setup: $(STAMP) zookeeper

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

zookeeper:
	@command -v java >/dev/null || { echo "java is required (a JRE 17+)"; exit 1; }
	@test -f $(ZK_JAR) || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q zookeeper; }

run: setup
	$(VENV)/bin/quire up

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

openapi: $(STAMP)
	$(PY) -m services.web.openapi_export

bench: setup
	$(PY) benchmarks/bookie_add.py
	$(VENV)/bin/quire bench --local --concurrency 64 --duration 10
	$(VENV)/bin/quire bench --local --concurrency 64 --batch 100 --duration 10

# A long simulator run (not a CI step): SEEDS seeds in two processes, one per core.
sim: setup
	@half=$$(( $(SEEDS) / 2 )); test=tests/simulation/test_simulation.py::test_protocol_invariants_hold_for_every_seed; \
	$(PY) -m pytest -q -s -p no:cacheprovider $$test --sim-seeds=$$half & first=$$!; \
	$(PY) -m pytest -q -s -p no:cacheprovider $$test --sim-seed-start=$$half --sim-seeds=$$(( $(SEEDS) - half )); second=$$?; \
	wait $$first && exit $$second

# A long run of the log simulator (not a CI step): SEEDS seeds of each kind in two processes.
sim-logs: setup
	@half=$$(( $(SEEDS) / 2 )); test=tests/simulation/test_log_simulation.py; \
	sel='real_acquire or duelling or idempotent'; \
	$(PY) -m pytest -q -s -p no:cacheprovider $$test -k "$$sel" --sim-seeds=$$half & first=$$!; \
	$(PY) -m pytest -q -s -p no:cacheprovider $$test -k "$$sel" --sim-seed-start=$$half --sim-seeds=$$(( $(SEEDS) - half )); second=$$?; \
	wait $$first && exit $$second

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
