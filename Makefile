# The two commands of the README: `make demo` and `make test`. Both set everything up themselves.
VENV   ?= .venv
BQ_VENV ?= .venv-bq
FOCUS_VENV ?= .venv-focus
FOCUS_TOOLKIT_VERSION := 0.14.1
BQ_PACKAGES := bqemulator==1.4.0 duckdb==1.5.5 duckdb-extensions==1.5.5 duckdb-extension-spatial==1.5.5 duckdb-extension-avro==1.5.5 numpy
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := poppler-utils libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core prometheus openssl chromium

.PHONY: demo test lint fuzz system-deps demo-data bench bench-billing bench-fleet clean

demo: system-deps $(VENV)/.demo demo-data
	@$(VENV)/bin/costaudit run fixtures/demo --out out/demo; rc=$$?; \
	  if [ $$rc -eq 2 ]; then echo "(exit 2: the audit ran but does not reconcile; the report says why)"; fi; \
	  [ $$rc -eq 0 ] || [ $$rc -eq 2 ]
	@# The quarterly review: two quarters of the demo deployment (fixtures/history, METHOD §10).
	$(VENV)/bin/costaudit review fixtures/history/q2 fixtures/history/q3 --out out/review

test: system-deps $(VENV)/.test $(BQ_VENV)/.ok $(FOCUS_VENV)/.ok-$(FOCUS_TOOLKIT_VERSION) demo-data
	$(PY) -m pytest -q -p no:cacheprovider

# Style (ruff) and types (mypy, against the committed baseline .ci/mypy-baseline.txt).
lint: $(VENV)/.lint
	$(VENV)/bin/ruff check .
	$(PY) .ci/mypy_check.py

$(VENV)/.lint: pyproject.toml $(VENV)/.test
	$(PIP) install -e '.[pdf,aws,gcp,test,profile,lint]'
	@touch $@

# System packages the report and its tests need (pdftotext/pdftoppm, pango for weasyprint, fonts,
# chromium for the HTML width test).
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  $(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(VENV)/bin/python:
	python3 -m venv $(VENV)

$(VENV)/.demo: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[pdf]'
	@touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.demo
	$(PIP) install -e '.[pdf,aws,gcp,test,profile]'
	@touch $@

# A local BigQuery-compatible emulator for the GCP billing tests, in its own environment
# (it pins an older DuckDB than the project's).
$(BQ_VENV)/.ok:
	python3 -m venv $(BQ_VENV)
	$(BQ_VENV)/bin/python -m pip -q --disable-pip-version-check install $(BQ_PACKAGES)
	$(BQ_VENV)/bin/python -c "import duckdb_extensions as d; [d.import_extension(n) for n in ('spatial','avro')]"
	@touch $@

# focus-data-toolkit (pure Python, offline once installed) for the FOCUS 1.3 and conformance tests
# (tests/connectors/billing/focus_toolkit.py pins the same version), in its own environment.
$(FOCUS_VENV)/.ok-$(FOCUS_TOOLKIT_VERSION):
	python3 -m venv $(FOCUS_VENV)
	$(FOCUS_VENV)/bin/python -m pip -q --disable-pip-version-check install focus-data-toolkit==$(FOCUS_TOOLKIT_VERSION)
	@touch $@

# The demo case is committed; regenerate it when it is missing.
demo-data: | $(VENV)/bin/python
	@[ -f fixtures/demo/case.toml ] || $(PY) fixtures/make_demo.py
	@[ -f fixtures/history/truth.json ] || $(PY) fixtures/make_history.py

# The fuzz suite (tests/fuzz) run longer than `make test` runs it: FUZZ_EXAMPLES inputs per parser,
# fresh ones each run (a failure prints the input and a @reproduce_failure line).
FUZZ_EXAMPLES ?= 2000
fuzz: $(VENV)/.test
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider tests/fuzz

bench: $(VENV)/.test
	$(PY) benchmarks/telemetry/run.py
	$(PY) benchmarks/trace/run.py
	$(PY) benchmarks/billing/run.py

bench-billing: $(VENV)/.test
	$(PY) benchmarks/billing/run.py

# The whole audit at fleet scale (issue 17): builds a month of 1,000 GPUs on first use (an hour or more)
bench-fleet: $(VENV)/.test
	$(PY) benchmarks/fleet/run.py --lines 1000000

clean:
	rm -rf out .pytest_cache
