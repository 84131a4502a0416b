# make venv | test | demo | bench
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-test
EXAMPLES_STAMP := $(VENV)/.stamp-examples

# one thread everywhere: the machines are shared, and timings and tolerances must not depend on the core count
export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export NUMBA_NUM_THREADS := 1

.PHONY: venv test demo bench

venv: $(STAMP)

# reinstall only when pyproject.toml changes
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[test]'
	touch $@

$(EXAMPLES_STAMP): $(STAMP)
	$(PY) -m pip install -e '.[examples]'
	touch $@

test: venv
	$(VENV)/bin/ruff check .
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest

demo: $(EXAMPLES_STAMP)
	$(PY) examples/demo.py

bench: venv
	$(PY) -m benchmarks all
