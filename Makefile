# The verbs a newcomer needs. `make run` and `make test` do all the set-up themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
ZK_JAR := /usr/share/java/zookeeper.jar
# The running java's major version (0 if there is none): 1.8 -> 1, 17 -> 17.
JAVA_MAJOR := java -XshowSettings:properties -version 2>&1 | \
	sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p' | grep . || echo 0
GEN_VENV := .venv-openapi
GEN_STAMP := $(GEN_VENV)/.installed
TS_DIR := openapi/clients/typescript
TS_STAMP := $(TS_DIR)/node_modules/.installed
PYTEST_ARGS ?=
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2
SEEDS ?= 100000
SECONDS ?= 600
SEED ?= 1

.PHONY: native run test test-fast lint format bench compare-peers sim sim-logs chaos fuzz fuzz-decoders openapi setup java zookeeper browser iptables node clients spark-cluster clean

# ZooKeeper and Spark (pyspark, a pinned dependency) both run on Java: a JRE 17+.
# The admin page's browser tests need Debian's chromium (Playwright's download cannot work).
# The multi-host tests (tests/multihost/) partition hosts with Debian's iptables.
# The generated clients (openapi/clients/): the Python one installed in the venv, the
# TypeScript one's npm packages and the generators themselves.
setup: $(STAMP) native java zookeeper browser iptables clients

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e openapi/clients/python
	touch $(STAMP)

# The add path's modules compiled with mypyc (services/native.py): rebuilt unless the build
# in place matches every source of the packages (the services use no other build).
native: $(STAMP)
	$(PY) -c 'from services import native; native.ensure()'

clients: $(GEN_STAMP) $(TS_STAMP)

# openapi-python-client in its own venv: it pins typer/pydantic versions ours must not take.
$(GEN_STAMP): openapi/clients/generator-requirements.txt
	python3 -m venv $(GEN_VENV)
	$(GEN_VENV)/bin/pip install -q --disable-pip-version-check -r openapi/clients/generator-requirements.txt
	touch $(GEN_STAMP)

$(TS_STAMP): $(TS_DIR)/package-lock.json | node
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_STAMP)

# Node 18+ and npm for the TypeScript client: Debian's nodejs and npm if missing.
node:
	@command -v npm >/dev/null || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q nodejs npm; }

# A JRE 17+ for ZooKeeper and Spark: installed from Debian's default-jre-headless if missing.
java:
	@if [ "$$($(JAVA_MAJOR))" -lt 17 ] 2>/dev/null; then \
		echo "installing a JRE 17+ (default-jre-headless)"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q default-jre-headless; \
	fi
	@[ "$$($(JAVA_MAJOR))" -ge 17 ] || { echo "java is required (a JRE 17+)"; exit 1; }

zookeeper: java
	@test -f $(ZK_JAR) || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q zookeeper; }

browser:
	@test -x /usr/bin/chromium || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; }

# The multi-host tests' tools: iproute2's ip (hosts) and iptables-nft (partitions), the
# backend tests/multihost/network.py names.
iptables:
	@{ command -v ip && command -v iptables-nft; } >/dev/null || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q iproute2 iptables; }

run: setup
	$(VENV)/bin/quire up

# Test runs keep bytecode, pytest's rewritten test modules included, even where the
# environment asks Python not to write it: every test process (each worker, the `alone`
# part, each CLI a test runs) would otherwise compile and rewrite every module again,
# about 10 s of CPU for a worker's collection alone (tests/README.md).
test test-fast sim sim-logs fuzz-decoders: export PYTHONDONTWRITEBYTECODE =

# The whole suite: spread over TEST_WORKERS pytest-xdist workers, then the few tests
# marked `alone` one at a time (tests/README.md: what runs where, and the measurements
# behind the count). Both parts always run; exit 5 is "no alone test was selected".
test: setup
	@status=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not alone" $(PYTEST_ARGS) || status=$$?; \
	$(PY) -m pytest -m alone $(PYTEST_ARGS) || { code=$$?; [ $$code -eq 5 ] || status=$$code; }; \
	exit $$status

# The inner loop after a change: unit and simulation tests only, no process started.
test-fast: setup
	$(PY) -m pytest -n $(FAST_WORKERS) tests/unit tests/simulation $(PYTEST_ARGS)

# Style, formatting, types, and the import layers (pyproject.toml [tool.importlinter]).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The documents, then both clients generated from the gateway's.
openapi: $(STAMP) clients
	$(PY) -m services.web.openapi_export
	$(PY) -m services.web.clients

bench: setup
	$(PY) benchmarks/bookie_add.py
	$(VENV)/bin/quire bench --local --concurrency 64 --duration 10
	$(VENV)/bin/quire bench --local --concurrency 64 --batch 100 --duration 10

# Issue 13's targets: the peers (scripts outside the repository, see benchmarks/compare_peers.py)
# and Quire's cases, three rounds (~14 min).
compare-peers: setup
	$(PY) benchmarks/compare_peers.py --rounds 3

# A long simulator run (not a CI step): SEEDS seeds in blocks over two workers, one per core.
sim: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --sim-seeds=$(SEEDS) \
		tests/simulation/test_simulation.py::test_protocol_invariants_hold_for_every_seed

# A long run of the log simulator (not a CI step): SEEDS seeds of each kind, their blocks
# spread over two processes.
sim-logs: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --sim-seeds=$(SEEDS) \
		tests/simulation/test_log_simulation.py -k 'real_acquire or duelling or idempotent'

# A chaos run (not a CI step; CI runs one short seed, tests/chaos/test_chaos.py): the
# seeded workload and faults for SECONDS seconds on hosts of their own (root only), then
# the checker; the history and figures go to chaos-out/seed-SEED (docs/development.md).
# CHAOS_ARGS adds run options: --spark (Spark batch reads), --shapes all (Qa = 1 too).
CHAOS_ARGS ?=
chaos: setup
	$(PY) -m tests.chaos.run --seconds $(SECONDS) --seed $(SEED) --out chaos-out/seed-$(SEED) $(CHAOS_ARGS)

# The decoders' property tests (bookie framing, bulk read format, add bodies) with the
# "fuzz" Hypothesis profile (tests/conftest.py: 20,000 random examples each instead of
# CI's 100 deterministic ones), then the end-to-end fuzzing against a real bookie and
# gateway (2,000 bodies each instead of 200). Not a CI step: it takes a while.
FUZZ_DECODER_TESTS := tests/unit/wire/test_framing_fuzz.py tests/unit/wire/test_entries_stream_fuzz.py \
	tests/unit/wire/test_add_bodies_fuzz.py tests/integration/test_decoder_fuzz.py
fuzz-decoders: $(STAMP) zookeeper
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -p no:cacheprovider --timeout=3600 $(FUZZ_DECODER_TESTS)

# A long schemathesis run (not a CI step): FUZZ_REQUESTS requests or more against a live
# gateway and a live bookie each (CI's run of the same test makes 2,000 per service).
# Depends on nothing: after `make setup` (or with PY=another/python).
FUZZ_REQUESTS ?= 10000
fuzz:
	QUIRE_FUZZ_REQUESTS=$(FUZZ_REQUESTS) $(PY) -m pytest -q -s -p no:cacheprovider \
		tests/integration/test_schemathesis.py

# A Spark standalone master and two workers on 127.0.0.1 (the pip package's own scripts,
# as the cluster tests start them) until Ctrl-C: submit with --master spark://127.0.0.1:7077.
spark-cluster: setup
	$(PY) -m tests.spark.cluster --port 7077 --webui-port 8180

clean:
	rm -rf $(VENV) $(GEN_VENV) .native build $(TS_DIR)/node_modules $(TS_DIR)/dist .pytest_cache .ruff_cache .mypy_cache .hypothesis
