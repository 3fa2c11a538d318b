#!/usr/bin/env bash
# The byte-flip fuzz campaign: N mutations (default 1000) of each given .rvk, under AddressSanitizer
# and UBSan, refused with a clear error or loaded and run on DEVICE (default pocl; "none": parsing
# and validation only). CI runs a slice (tests/runtime/native/test_tools.py).
#   native/tests/fuzz.sh model.rvk [model2.rvk ...]   (env: MUTATIONS, SEED, DEVICE)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build-asan"
[ -f "$build/CMakeCache.txt" ] || cmake -S "$here" -B "$build" -DRVK_SANITIZE=ON -DRVK_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j2 --target rvk-fuzz >/dev/null
device=()
[ "${DEVICE:-pocl}" = none ] || device=(--device "${DEVICE:-pocl}")
status=0
for model in "$@"; do
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/rvk-fuzz" "$model" --mutations "${MUTATIONS:-1000}" --seed "${SEED:-1}" "${device[@]}" --quiet || status=1
done
exit $status
