# The README's quick start: `make demo` and `make test` set everything up themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test test-fast lint bench bench-pytest clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint,compression,spark,report,server,client]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mledger demo

# Static checks: lint (ruff), types (mypy), the layer and no-cycle import contracts (import-linter).
lint: $(STAMP)
	$(VENV)/bin/ruff check src
	$(VENV)/bin/ruff format --check src
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: $(STAMP) lint
	scripts/ensure_chromium.sh
	$(PY) -m pytest -q

test-fast: $(STAMP)
	scripts/ensure_chromium.sh
	$(PY) -m pytest -q -m "not spark and not slow and not cluster"

bench: $(STAMP) $(BENCH_STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# The hot paths under pytest-benchmark: BENCH_ARGS="--benchmark-save=NAME" / "--benchmark-compare"
bench-pytest: $(BENCH_STAMP)
	$(PY) -m pytest benchmarks -q --benchmark-sort=fullname $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
