"""Kernels whose device code is the same, compiled once.

A decoder's layers, a ResNet's repeated blocks: TVM's fusion makes one function per call site
(``fused_matmul_int43_add53``, ``..._add55``), each a copy of the others with its own name, so the
drivers compile the same code once a layer (a Qwen3-0.6B build: 216 kernels, 15 MB of OpenCL C).
Here the finalized device functions (what the codegen saw) are compared by TVM's structural
equality, their names aside, and each class of equal functions is written once:

* OpenCL: the class's first kernel (by name) keeps its function; the others name it as their
  ``entry`` (the runtime makes each kernel object from its entry; every kernel keeps its own name,
  launch geometry and provenance, so profiles and bisection still name each call site). TVM's
  forward declarations of every kernel ahead of every function (quadratic in the kernel count;
  kernels never call each other) are dropped.
* Vulkan: the class's shaders share one span of the source (the runtime makes one pipeline per
  span and binding list).
"""

from __future__ import annotations

import re
from typing import Dict, List

import tvm
import tvm_ffi

__all__ = ["same_kernels", "share_opencl_functions"]

_SECTION = re.compile(r"^// Function: (\S+)\n", re.MULTILINE)
_DECLARATION = re.compile(r"^__kernel void [^\n{;]*\);\n", re.MULTILINE)


def same_kernels(device: tvm.IRModule) -> Dict[str, str]:
    """Kernel name -> the first kernel name (in sorted order) whose device function equals it
    structurally (names aside); kernels with no equal earlier one are absent."""
    classes: Dict[int, List[tuple]] = {}
    found: Dict[str, str] = {}
    funcs = sorted((str(f.attrs["global_symbol"]), f) for f in device.functions.values() if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and "global_symbol" in f.attrs)
    for name, func in funcs:
        plain = func.with_attr("global_symbol", "kernel")
        bucket = classes.setdefault(tvm_ffi.structural_hash(plain, map_free_vars=True), [])
        first = next((n for n, f in bucket if tvm_ffi.structural_equal(plain, f, map_free_vars=True)), None)
        if first is None:
            bucket.append((name, plain))
        else:
            found[name] = first
    return found


def share_opencl_functions(program: dict, source: str, same: Dict[str, str]) -> str:
    """Give each kernel of ``program`` whose function equals an earlier one that function as its
    ``entry``, and return ``source`` with each shared function once and no forward declarations.
    A function is kept whenever a kernel runs it (its own or as an entry)."""
    sections = list(_SECTION.finditer(source))
    if not sections:
        return source
    names = {k["name"] for k in program["kernels"]}
    for kernel in program["kernels"]:
        first = same.get(kernel["name"])
        if first is not None and first in names and first != kernel["name"]:
            kernel["entry"] = first
    run = {k.get("entry", k["name"]) for k in program["kernels"]}
    out = [_DECLARATION.sub("", source[: sections[0].start()])]
    for i, m in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(source)
        name = m.group(1)
        if name in run or name not in names:  # (a function no kernel entry names: kept as it was)
            out.append(_DECLARATION.sub("", source[m.start() : end]))
    return "".join(out)
