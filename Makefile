# The README's quick start: `make demo` and `make test` set everything up themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test test-fast lint docs bench bench-pytest clean check-java

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint,docs,compression,spark,report,server,client]'
	touch $(STAMP)

demo: check-java $(STAMP)
	$(VENV)/bin/mledger demo

# Static checks: lint (ruff), types (mypy), the layer, no-cycle and faces import contracts
# (import-linter), and docstrings that cite names through faces (faces_codemod.py --check).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) scripts/faces_codemod.py --check

# The documentation site (mkdocs.yml: MkDocs + Material + mkdocstrings) into site/, offline,
# strict: a broken link, a missing page or a docstring cross-reference that resolves nowhere
# fails the build. Part of make test, so CI builds it too. (No --quiet: it hides the warnings from
# the strict count, and the build then passes whatever it finds.)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# System requirements, checked before anything slow starts: Java 17+ for Spark (make demo, the
# Spark tests) and headless Chromium for the report's screenshot test (installed with apt-get as
# root or through sudo). Where Chromium cannot be installed, make test runs every other test and
# says, before and after, that it left the browser test out; CI (CI=true) runs everything or fails.
CHECK_JAVA ?= scripts/check_java.sh
ENSURE_CHROMIUM ?= scripts/ensure_chromium.sh
LEFT_OUT = *** make: LEFT OUT the browser test (pytest -m browser: the report rendered by headless Chromium): Chromium is missing and could not be installed (see above; run as root or with sudo, or set MLEDGER_CHROMIUM) ***

# $(call pytest,MARKER EXPRESSION): pytest over the suite, less the browser test where it cannot run;
# --durations=30 prints the slowest tests, so a CI log shows where the time budget goes.
PYTEST := $(PY) -m pytest -q --durations=30
define pytest
	@if $(ENSURE_CHROMIUM); then \
		echo '$(PYTEST)$(if $(1), -m "$(1)")'; \
		$(PYTEST)$(if $(1), -m "$(1)"); \
	elif [ "$${CI:-}" = true ]; then \
		echo "make: CI runs every test, the browser test included, and Chromium could not be installed" >&2; \
		exit 1; \
	else \
		echo "$(LEFT_OUT)" >&2; \
		echo '$(PYTEST) -m "$(if $(1),$(1) and )not browser"'; \
		status=0; $(PYTEST) -m "$(if $(1),$(1) and )not browser" || status=$$?; \
		echo "$(LEFT_OUT)" >&2; \
		exit $$status; \
	fi
endef

check-java:
	@$(CHECK_JAVA)

test: check-java $(STAMP) lint docs
	$(call pytest,)

test-fast: $(STAMP)
	$(call pytest,not spark and not slow and not cluster)

bench: $(STAMP) $(BENCH_STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# The hot paths under pytest-benchmark: BENCH_ARGS="--benchmark-save=NAME" / "--benchmark-compare"
bench-pytest: $(BENCH_STAMP)
	$(PY) -m pytest benchmarks -q --benchmark-sort=fullname $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache
