# make venv | test | docs | demo | bench
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-test
EXAMPLES_STAMP := $(VENV)/.stamp-examples
DOCS_STAMP := $(VENV)/.stamp-docs

# one thread everywhere: the machines are shared, and timings and tolerances must not depend on the core count
export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
export NUMBA_NUM_THREADS := 1

.PHONY: venv test docs demo bench

venv: $(STAMP)

# reinstall only when pyproject.toml or a C extension's source changes (the install compiles them in place)
$(STAMP): pyproject.toml funclib/_fastops.c kernels/_gemm.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[test]'
	touch $@

$(EXAMPLES_STAMP): $(STAMP)
	$(PY) -m pip install -e '.[examples]'
	touch $@

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -e '.[docs]'
	touch $@

test: venv
	$(VENV)/bin/ruff check .
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest

# the site, with warnings as errors; notebooks run on the first build and come from a cache after that
docs: $(DOCS_STAMP)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

demo: $(EXAMPLES_STAMP)
	$(PY) examples/demo.py

bench: venv
	$(PY) -m benchmarks all
