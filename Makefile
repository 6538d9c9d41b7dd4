# The two set-up commands of the README are `make demo` and `make test`; both create .venv on first use.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint proto proto-go proto-check bench clean serve kafka-broker

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/groupcoord demo

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy groupcoord
	$(VENV)/bin/lint-imports
	bash scripts/kafka-broker.sh >/dev/null
	$(PY) -m pytest -q $(PYTEST_ARGS)

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
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache demo-output
