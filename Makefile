# Bootstraps .venv from nothing: `make serve` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
#: What serving needs: the package and its faster embedding model, without the tools for tests.
SERVE_STAMP := $(VENV)/.installed-serve

.PHONY: serve test demo lint browser typecheck bench bench-locomo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(SERVE_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[fast,mcp]"
	touch $(SERVE_STAMP)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP) $(SERVE_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The dashboard's end-to-end tests drive Debian's Chromium (no browser download).
browser:
	@command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null \
		|| (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)

test: lint typecheck browser
	$(BIN)/pytest

serve: $(SERVE_STAMP)
	$(BIN)/loci serve

demo: $(SERVE_STAMP)
	$(BIN)/loci demo

bench: $(STAMP)
	$(BIN)/python benchmarks/foundation.py
	$(BIN)/python benchmarks/retrieval_latency.py
	$(BIN)/python benchmarks/memory_save.py
	$(BIN)/python benchmarks/cache_stability.py
	$(BIN)/python benchmarks/compaction.py
	$(BIN)/python benchmarks/knowledge.py
	$(BIN)/python benchmarks/fts_merge.py

# LoCoMo data is not shipped (CC BY-NC): point LOCOMO at a copy of locomo_dev.json.
LOCOMO ?= ../shared/data/locomo/locomo_dev.json
bench-locomo: $(STAMP)
	$(BIN)/python benchmarks/locomo.py --data $(LOCOMO)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
