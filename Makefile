# The two commands of the README. Each sets everything up on a fresh machine first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup demo test bench

setup:
	$(PIP) install -q -e ".[test]"

demo: setup
	relax-vk demo

test: setup
	$(PYTHON) -m pytest -q -n 2 tests

bench: setup
	$(PYTHON) benchmarks/scope_passes.py
