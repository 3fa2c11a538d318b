# The two commands of the README. Each sets everything up on a fresh machine first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup demo test bench

setup:
	$(PIP) install -q -e ".[test]"
	@# A working OpenCL compiler with image support for the tests (pip's bundled pocl 3.0 cannot
	@# target CPUs newer than its LLVM). Root on Debian/Ubuntu installs Debian's pocl.
	@if ! $(PYTHON) -c "from relax_vk.opencl import find_device; find_device()" >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q pocl-opencl-icd >/dev/null; \
	  else echo "warning: no working OpenCL device; install pocl-opencl-icd (Debian/Ubuntu)"; fi; \
	fi

demo: setup
	relax-vk demo

test: setup
	$(PYTHON) -m pytest -q -n 2 tests

bench: setup
	$(PYTHON) benchmarks/scope_passes.py
	$(PYTHON) benchmarks/compile.py
