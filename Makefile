# The two commands of the README. Each sets everything up on a fresh machine first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
NATIVE_BUILD ?= native/build
NATIVE_JOBS ?= 2

.PHONY: setup demo test bench

setup:
	$(PIP) install -q -e ".[test]"
	@# The test devices: a working OpenCL compiler with image support (pip's bundled pocl 3.0 cannot
	@# target CPUs newer than its LLVM) and a Vulkan driver for wgpu; the native runtime's build tools.
	@# As root on Debian/Ubuntu this installs Debian's pocl, Mesa's lavapipe, cmake, g++, the OpenCL
	@# headers and the ICD loader, and the AArch64 cross compiler the phone-export tests link with
	@# (relax-vk build --runtime tvm --host aarch64-linux-gnu) when they are missing.
	@missing=""; \
	ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || missing="$$missing pocl-opencl-icd"; \
	{ /sbin/ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 ' && ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1; } || missing="$$missing mesa-vulkan-drivers libvulkan1"; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	[ -f /usr/include/CL/cl.h ] || missing="$$missing opencl-c-headers"; \
	/sbin/ldconfig -p 2>/dev/null | grep -q 'libOpenCL.so.1 ' || missing="$$missing ocl-icd-libopencl1"; \
	command -v aarch64-linux-gnu-g++ >/dev/null || missing="$$missing g++-aarch64-linux-gnu"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing"; \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; \
	  else echo "warning: missing test devices or build tools; install$$missing (Debian/Ubuntu)"; fi; \
	fi
	@# The native runtime (native/: C ABI library, rvk-run, the example): CMake and the OpenCL headers
	@# (installed above when missing; the ICD loader is opened at run time), wgpu-native's headers from
	@# this Python's wgpu wheel (its library is opened at run time). Incremental: a no-op when nothing changed.
	cmake -S native -B $(NATIVE_BUILD) -DCMAKE_BUILD_TYPE=Release -DRVK_PYTHON="$$(command -v $(PYTHON))" >/dev/null
	cmake --build $(NATIVE_BUILD) -j$(NATIVE_JOBS) >/dev/null

demo: setup
	relax-vk demo

test: setup
	$(PYTHON) -m pytest -q -n 2 tests

bench: setup
	$(PYTHON) benchmarks/scope_passes.py
	$(PYTHON) benchmarks/compile.py
