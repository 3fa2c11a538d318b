#!/usr/bin/env bash
# First and second start of a whole `rvk-run` process (load + one inference), every cache empty at
# the first: relax_vk's and the drivers' default ones (a fresh $HOME per case, $XDG_CACHE_HOME and
# every cache variable unset). Works for OpenCL and Vulkan artifacts alike.
#
#   benchmarks/cold_start_rvk_run.sh MODEL.rvk INPUT.npy [DEVICE=gpu] [STARTS=3]
#
# Cases: "cache" (the defaults: OpenCL binaries, the Vulkan drivers' caches in ~/.cache/relax_vk),
# "cache, 8 pipeline threads" ($RVK_PIPELINE_THREADS=8, Vulkan only), "no cache" ($RELAX_VK_NO_CACHE=1
# and NVIDIA's and Mesa's own disk caches off: every start compiles). Per start it prints the process's
# wall seconds and rvk-run's program origin, load and first-inference times; then the second start's
# share of the first. Needs rvk-run (native/build, or $RVK_RUN) and, for Vulkan, $RVK_WGPU_LIBRARY
# (the wgpu wheel's wgpu/resources/libwgpu_native-release.so) and a Vulkan loader and driver
# (GPU machine: . benchmarks/gpu_env.sh first).
set -u
model=$1 input=$2 device=${3:-gpu} starts=${4:-3}
tool=${RVK_RUN:-$(dirname "$0")/../native/build/rvk-run}
TIMEFORMAT=%R
one_case() {  # name, then VAR=value ... for every start of the case
    local name=$1; shift
    local home first=""
    home=$(mktemp -d)
    for i in $(seq 1 "$starts"); do
        local out secs
        out=$( { time env -u XDG_CACHE_HOME -u RELAX_VK_CACHE_DIR -u RELAX_VK_NO_CACHE -u RVK_PIPELINE_THREADS \
                   -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_PATH -u __GL_SHADER_DISK_CACHE_SKIP_CLEANUP \
                   -u MESA_SHADER_CACHE_DIR -u MESA_SHADER_CACHE_DISABLE -u MESA_GLSL_CACHE_DIR -u MESA_GLSL_CACHE_DISABLE \
                   -u CUDA_CACHE_PATH -u CUDA_CACHE_DISABLE -u POCL_CACHE_DIR \
                   HOME="$home" XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp} "$@" \
                   "$tool" "$model" --device "$device" --input "$input" > "$home/out.txt" 2> "$home/err.txt"; } 2>&1 )
        secs=$(tail -n1 <<< "$out")
        [ -z "$first" ] && first=$secs
        printf '%-28s start %d: %6.3f s  (%s; %s)\n' "$name" "$i" "$secs" "$(grep -m1 '^program:' "$home/out.txt")" \
            "$(grep -m1 '^load:' "$home/out.txt" || tail -n2 "$home/err.txt")"
    done
    python3 -c "print(f'{\"$name\":<28} second/first: {$secs / $first:.3f}')"
    echo "$name: files left in \$HOME/.cache: $(cd "$home" && find .cache -type f 2>/dev/null | cut -d/ -f2-4 | sort | uniq -c | tr '\n' ' ')"
    rm -rf "$home"
}
one_case "cache"
one_case "cache, 8 pipeline threads" RVK_PIPELINE_THREADS=8
one_case "no cache" RELAX_VK_NO_CACHE=1 __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true CUDA_CACHE_DISABLE=1 POCL_KERNEL_CACHE=0
