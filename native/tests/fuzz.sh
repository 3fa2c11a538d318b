#!/usr/bin/env bash
# The byte-flip fuzz campaign: N mutations (default 1000) of each given .rvk, under AddressSanitizer
# and UBSan, refused with a clear error or loaded and run on DEVICE (default pocl; "lavapipe" for a
# Vulkan .rvk, through the wgpu wheel's wgpu-native unless RVK_WGPU_LIBRARY is set; "none": parsing
# and validation only). Leaks inside the driver stack are suppressed (tests/lsan.supp), never the
# runtime's own; rvk-fuzz runs LeakSanitizer's check itself, once every session is destroyed and
# while the drivers are loaded (tools/leak_check.h). intercept_tls_get_addr=0: GCC 12's sanitizer
# runtime takes a dynamic TLS block that malloc put 16 bytes past a page boundary for a glibc 2.19
# block and reads ASan's chunk header as its bounds; the leak check then scans that range and dies
# ("Tracer caught signal 11"), for some seeds and not others (native/README.md, "Sanitizers").
# CI runs a slice (tests/runtime/native/test_tools.py).
#   native/tests/fuzz.sh model.rvk [model2.rvk ...]   (env: MUTATIONS, SEED, DEVICE)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build-asan"
[ -f "$build/CMakeCache.txt" ] || cmake -S "$here" -B "$build" -DRVK_SANITIZE=ON -DRVK_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j2 --target rvk-fuzz >/dev/null
device=()
[ "${DEVICE:-pocl}" = none ] || device=(--device "${DEVICE:-pocl}")
if [ -z "${RVK_WGPU_LIBRARY:-}" ]; then
  wheel="$(python3 -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("wgpu").origin))' 2>/dev/null || true)"
  if [ -n "$wheel" ]; then export RVK_WGPU_LIBRARY="$wheel/resources/libwgpu_native-release.so"; fi
fi
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
# mutants that load build programs of their own: their binaries, and pocl's kernel cache, go to a
# folder of this run, not the user's caches (unless RELAX_VK_CACHE_DIR / POCL_CACHE_DIR are set):
# every run compiles the same kernels the same way, whatever an earlier process left behind
run_dir="$(mktemp -d)"
trap 'rm -rf "$run_dir"' EXIT
export RELAX_VK_CACHE_DIR="${RELAX_VK_CACHE_DIR:-$run_dir/relax_vk}" POCL_CACHE_DIR="${POCL_CACHE_DIR:-$run_dir/pocl}"
status=0
for model in "$@"; do
  ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS="suppressions=$here/tests/lsan.supp" \
    "$build/rvk-fuzz" "$model" --mutations "${MUTATIONS:-1000}" --seed "${SEED:-1}" "${device[@]}" --quiet || status=1
done
exit $status
