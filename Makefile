# memfleet: every target creates the virtual environment it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv test demo bench lint typecheck clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP) lint
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/memfleet demo

bench: $(STAMP)
	$(PY) -m bench.run

lint: $(STAMP)
	$(VENV)/bin/ruff check worker api_stub tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .memfleet .pytest_cache .mypy_cache .ruff_cache
