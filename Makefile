# The two commands of the README. Each sets everything up on a fresh machine first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: setup demo test bench

setup:
	$(PIP) install -q -e ".[test]"
	@# The test devices: a working OpenCL compiler with image support (pip's bundled pocl 3.0 cannot
	@# target CPUs newer than its LLVM) and a Vulkan driver for wgpu. As root on Debian/Ubuntu this
	@# installs Debian's pocl and Mesa's lavapipe when they are missing, and the AArch64 cross
	@# compiler the phone-export tests link with (relax-vk build --runtime tvm --host aarch64-linux-gnu).
	@missing=""; \
	$(PYTHON) -c "from relax_vk.runtime.opencl import find_device; find_device()" >/dev/null 2>&1 || missing="$$missing pocl-opencl-icd"; \
	$(PYTHON) -c "from relax_vk.runtime.vulkan.devices import select_adapter; select_adapter()" >/dev/null 2>&1 || missing="$$missing mesa-vulkan-drivers libvulkan1"; \
	command -v aarch64-linux-gnu-g++ >/dev/null || missing="$$missing g++-aarch64-linux-gnu"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing"; \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; \
	  else echo "warning: missing test devices; install$$missing (Debian/Ubuntu)"; fi; \
	fi

demo: setup
	relax-vk demo

test: setup
	$(PYTHON) -m pytest -q -n 2 tests

bench: setup
	$(PYTHON) benchmarks/scope_passes.py
	$(PYTHON) benchmarks/compile.py
