# Set-up of the GPU machine (NVIDIA, no TVM, no network) for the benchmark scripts; source it there:
#
#     . benchmarks/gpu_env.sh && python3 benchmarks/gpu_benchmark.py --run .gpu/bench
#
# What it expects in the repository root, made here beforehand (both folders git-ignored through
# .git/info/exclude and carried with the call):
#   .whl/  cp312 wheels of pyopencl, pytools, platformdirs, siphash24, wgpu, rendercanvas, cffi, pycparser
#          (pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 ...)
#   .gl/   the Debian packages libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2
#          (apt-get download, amd64): the Vulkan loader and glvnd, which the machine's image lacks
# It registers NVIDIA's OpenCL ICD (OCL_ICD_VENDORS) and Vulkan ICD (VK_DRIVER_FILES) and puts the
# wheels on PYTHONPATH.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/icd
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
