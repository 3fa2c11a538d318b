# The two commands of the README. Each sets everything up on a fresh machine first.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
NATIVE_BUILD ?= native/build
NATIVE_JOBS ?= 2
SETUP_STAMP := build/.setup-stamp
NATIVE_SOURCES := native/CMakeLists.txt $(wildcard native/src/*.* native/src/shaders/* native/include/relax_vk/*.h native/tools/*.c)

.PHONY: setup demo test test-full bench

setup: $(SETUP_STAMP)
	@# The native runtime's build folder for the tests and the example (native/: C ABI library, rvk-run,
	@# the Android-shaped example), with this Python's wgpu wheel's headers and wgpu-native beside the
	@# library. Incremental: a no-op when nothing changed.
	cmake -S native -B $(NATIVE_BUILD) -DCMAKE_BUILD_TYPE=Release -DRVK_PYTHON="$$(command -v $(PYTHON))" >/dev/null
	cmake --build $(NATIVE_BUILD) -j$(NATIVE_JOBS) >/dev/null

# The package, installed editable, `relax-vk` and `rvk-run` on the PATH. A checkout's Python loads
# the library and rvk-run from native/build (the recipe of `setup`, after this one), so pip's CMake build (scikit-build-core)
# is told not to compile them again (RVK_PACKAGE_NATIVE=OFF; `pip install .` builds them into the
# package). Again only when the package's definition or the native sources changed.
$(SETUP_STAMP): pyproject.toml $(NATIVE_SOURCES)
	@# First the system's part: a working OpenCL compiler with image support (pip's bundled pocl 3.0
	@# cannot target CPUs newer than its LLVM), a Vulkan driver, the native runtime's build tools.
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
	$(PIP) install -q -e ".[test]" --config-settings=cmake.define.RVK_PACKAGE_NATIVE=OFF
	@mkdir -p $(dir $@) && touch $@

demo: setup
	relax-vk demo

test: setup
	$(PYTHON) -m pytest -q -n 2 --dist worksteal tests

# The suite with its full matrices (tests/conftest.py): every `one_api` case on both APIs and every
# zoo model; twice the model builds and driver compiles of `make test` for those tests
test-full: setup
	RELAX_VK_TEST_FULL=1 $(PYTHON) -m pytest -q -n 2 --dist worksteal tests

bench: setup
	$(PYTHON) benchmarks/scope_passes.py
	$(PYTHON) benchmarks/compile.py
