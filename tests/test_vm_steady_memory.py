"""TVM's Relax VM through ``relax_vk.load_vm`` allocates no device memory per call once warm
(issue 41: a byte storage on a texture VDevice went to TVM's naive allocator, one new buffer per
call; ``relax_vk.passes.PlaceBufferStorage``).

The device allocations are counted where they happen: a child process runs the VM with a small
``LD_PRELOAD`` library (built here from the C below) that counts ``clCreateBuffer``,
``clCreateImage`` and ``clReleaseMemObject`` calls, read after every call. Runs where TVM's runtime
has OpenCL (a libtvm_runtime built with it, or ``$RELAX_VK_TVM_OPENCL_LIB`` naming a library with
TVM's OpenCL runtime to load first, as in ``test_deploy.py``) and a C compiler is installed."""

import ctypes
import json
import os
import shutil
import subprocess
import sys

import pytest

import relax_vk
from relax_vk import tvm_runtime
from relax_vk.frontends import load_model

from helpers import small_classifier

if os.environ.get("RELAX_VK_TVM_OPENCL_LIB"):
    ctypes.CDLL(os.environ["RELAX_VK_TVM_OPENCL_LIB"], mode=ctypes.RTLD_GLOBAL)

_CC = shutil.which("cc") or shutil.which("gcc")

pytestmark = [
    pytest.mark.skipif(
        not tvm_runtime.has_runtime("opencl"),
        reason="this TVM runtime has no OpenCL (the PyPI wheel's): set RELAX_VK_TVM_OPENCL_LIB to a library with TVM's OpenCL runtime",
    ),
    pytest.mark.skipif(_CC is None, reason="no C compiler (cc) for the OpenCL call-counting library"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts OpenCL calls through LD_PRELOAD (Linux)"),
]

#: counts the OpenCL memory objects created (buffers, images) and released, forwarding each call
_COUNTER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
typedef void* cl_mem;
static long counts[3]; /* buffers created, images created, releases */
long rvk_cl_count(int i) { return __atomic_load_n(&counts[i], __ATOMIC_RELAXED); }
cl_mem clCreateBuffer(void* c, uint64_t f, size_t size, void* host, int32_t* err) {
  static cl_mem (*real)(void*, uint64_t, size_t, void*, int32_t*);
  if (!real) real = (cl_mem (*)(void*, uint64_t, size_t, void*, int32_t*))dlsym(RTLD_NEXT, "clCreateBuffer");
  __atomic_add_fetch(&counts[0], 1, __ATOMIC_RELAXED);
  return real(c, f, size, host, err);
}
cl_mem clCreateImage(void* c, uint64_t f, const void* fmt, const void* desc, void* host, int32_t* err) {
  static cl_mem (*real)(void*, uint64_t, const void*, const void*, void*, int32_t*);
  if (!real) real = (cl_mem (*)(void*, uint64_t, const void*, const void*, void*, int32_t*))dlsym(RTLD_NEXT, "clCreateImage");
  __atomic_add_fetch(&counts[1], 1, __ATOMIC_RELAXED);
  return real(c, f, fmt, desc, host, err);
}
int32_t clReleaseMemObject(cl_mem m) {
  static int32_t (*real)(cl_mem);
  if (!real) real = (int32_t (*)(cl_mem))dlsym(RTLD_NEXT, "clReleaseMemObject");
  __atomic_add_fetch(&counts[2], 1, __ATOMIC_RELAXED);
  return real(m);
}
"""

#: the child: load_vm over the library, ``calls`` calls of vm["main"], the counts after each
_CHILD = r"""
import ctypes, json, os, sys
if os.environ.get("RELAX_VK_TVM_OPENCL_LIB"):
    ctypes.CDLL(os.environ["RELAX_VK_TVM_OPENCL_LIB"], mode=ctypes.RTLD_GLOBAL)
counter = ctypes.CDLL(os.environ["RVK_CL_COUNTER"])
counter.rvk_cl_count.restype = ctypes.c_long
import numpy as np, tvm, relax_vk
path, calls = sys.argv[1], int(sys.argv[2])
inputs = [tvm.runtime.tensor(x, device=tvm.opencl(0)) for x in np.load(sys.argv[3]).values()]
vm = relax_vk.load_vm(path, tvm.opencl(0))
count = lambda: [counter.rvk_cl_count(i) for i in range(3)]
rows, first, last = [count()], None, None
for _ in range(calls):
    result = vm["main"](*inputs)
    last = result.numpy() if hasattr(result, "numpy") else result[0].numpy()
    first = last if first is None else first
    del result
    rows.append(count())
print(json.dumps({"rows": rows, "same": bool(np.array_equal(first, last))}))
"""


def _counter(folder) -> str:
    source, lib = os.path.join(folder, "rvk_cl_count.c"), os.path.join(folder, "librvk_cl_count.so")
    with open(source, "w") as f:
        f.write(_COUNTER_C)
    subprocess.run([_CC, "-O2", "-shared", "-fPIC", source, "-o", lib, "-ldl"], check=True)
    return lib


def _run_counted(mod, calls, pocl, tmp_path):
    """The OpenCL object counts (buffers, images, releases) after load_vm and after each of ``calls``
    calls of ``vm["main"]`` in a fresh process, and whether the last output equals the first."""
    import numpy as np

    from relax_vk.analysis.reference import random_inputs

    compiled = relax_vk.build(mod, relax_vk.target.opencl(opencl_device=pocl))
    path, data = str(tmp_path / "m.so"), str(tmp_path / "inputs.npz")
    tvm_runtime.export_library(compiled.executable, path)
    np.savez(data, *random_inputs(mod))
    counter = _counter(str(tmp_path))
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(relax_vk.__file__)))
    env = dict(os.environ, RVK_CL_COUNTER=counter)
    env["LD_PRELOAD"] = " ".join(p for p in (counter, os.environ.get("LD_PRELOAD")) if p)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), package_root) if p)
    out = subprocess.run([sys.executable, "-c", _CHILD, path, str(calls), data], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return report["rows"], report["same"]


@pytest.mark.parametrize("name,calls", [("small-classifier", 1000), ("mobilenet_v2", 100)])
def test_load_vm_allocates_nothing_per_call_after_the_second(name, calls, pocl, tmp_path):
    mod = small_classifier() if name == "small-classifier" else load_model(name)[0]
    rows, same = _run_counted(mod, calls, pocl, tmp_path)
    assert same  # every call's output equals the first's
    buffers, images, releases = zip(*rows)
    assert images[1] > images[0]  # the counter sees the VM's allocations (the first call's images)
    # call 2 may allocate what call 1's result still held (the VM keeps its last return value);
    # from then on no memory object is created or released: the same storages serve every call
    per_call = [[rows[k][i] - rows[k - 1][i] for i in range(3)] for k in range(3, len(rows))]
    changed = [k + 3 for k, d in enumerate(per_call) if d != [0, 0, 0]]
    assert not changed, (
        f"{len(changed)} of calls 3..{calls} created or released OpenCL objects (first: call {changed[0]}); "
        f"(buffers, images, releases) after call 2 {rows[2]}, after call {calls} {rows[-1]}"
    )
