# The two set-up commands of the README are `make demo` and `make test`; both create .venv on first use.
# `make test` installs what else it needs as its visible `setup` step; `make test-fast` is the in-process loop.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# `make test-fast` leaves out every test these markers select (set by folder in tests/conftest.py, HEAVY).
FAST := not integration and not kafka and not spark and not browser

.PHONY: demo test test-fast test-kafka-faults setup docs lint proto proto-go proto-check bench clean serve kafka-broker

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The compiled gRPC front end (`serve --front-end native`): maturin builds native/frontend with cargo (Rust from
# rustup; crates from crates.io; build.rs compiles proto/ itself). Rebuilt when its sources or proto/ change.
FRONTEND := $(VENV)/.frontend-installed
$(FRONTEND): $(STAMP) native/frontend/pyproject.toml native/frontend/Cargo.toml native/frontend/Cargo.lock \
		native/frontend/build.rs $(wildcard native/frontend/src/*.rs) $(wildcard proto/groupcoord/wire/v1/*.proto)
	@command -v cargo >/dev/null 2>&1 || { echo "the native front end needs Rust's cargo on PATH (rustup.rs)"; exit 1; }
	CARGO_TARGET_DIR=$(CURDIR)/.cache/frontend-target $(PY) -m pip install --quiet ./native/frontend
	touch $(FRONTEND)

demo: $(FRONTEND)
	$(VENV)/bin/groupcoord demo

# What the tests need beyond PyPI: Debian's docker-compose and chromium, Java 17 and Maven (scripts/ci-setup.sh
# apt-installs the missing ones and says which), then Kafka 4.4.0's jars from Maven Central into .cache/.
setup: $(FRONTEND)
	bash scripts/ci-setup.sh
	bash scripts/kafka-broker.sh
	$(PY) -c "from groupcoord.spark_kafka_jars import kafka_source_jars as j; print('spark-sql-kafka', j().version)"

# Everything: lint, types, import contracts, the docs site (--strict: broken links fail), the whole suite on two
# pytest-xdist workers (docs/development/testing.md says why).
test: setup
	$(PY) -m ruff check .
	$(PY) -m mypy groupcoord
	$(VENV)/bin/lint-imports
	$(PY) -m groupcoord.docsgen --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir .cache/site
	$(PY) -m pytest -q -n 2 --durations=25 $(PYTEST_ARGS)

# The Kafka-backed mode's short fault run alone (3 brokers, 3 instances, every fault kind once, about 90 s; also
# part of `make test`); `PYTEST_ARGS=-s` prints each phase's wall time.
test-kafka-faults: setup
	$(PY) -m pytest -q tests/faults/test_kafka_fault_suite.py $(PYTEST_ARGS)

# The in-process tests only (core, assignors, conformance, tools): no server, broker, JVM, Spark or browser.
test-fast: $(FRONTEND)
	$(PY) -m pytest -q -m "$(FAST)" --durations=10 $(PYTEST_ARGS)

# The documentation site: regenerate docs/reference/ from the code, then build it into site/.
docs: $(STAMP)
	$(PY) -m groupcoord.docsgen
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy groupcoord
	$(VENV)/bin/lint-imports

# The Apache Kafka broker of tests/realkafka: jars from Maven Central into .cache/ (first run only, seconds).
kafka-broker:
	bash scripts/kafka-broker.sh

# Regenerate groupcoord/wire/v1/*_pb2*.py from proto/ (tests/test_proto_drift.py checks they match).
proto: $(STAMP)
	$(PY) -m groupcoord.protogen

# Regenerate the Go load generator's stubs (bench/go/heartbeat/gcpb) from proto/ (needs Go; tests/test_go_proto_drift.py).
proto-go: $(STAMP)
	$(PY) -m groupcoord.protogen --go

bench: $(STAMP)
	$(PY) -m bench

serve: $(STAMP)
	$(VENV)/bin/groupcoord serve --topic demo:24

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache demo-output
