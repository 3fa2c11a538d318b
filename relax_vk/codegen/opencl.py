"""OpenCL C: TVM's own codegen writes it (``target.build.opencl``); this reads it back out of a
compiled executable."""

from __future__ import annotations

import re
from typing import List, Optional

__all__ = ["aligned_byte_loads", "kernel_names", "opencl_module", "opencl_source"]

_KERNEL_RE = re.compile(r"__kernel\s+void\s+(?:__attribute__\(\([^)]*\)\)\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def kernel_names(source: str) -> List[str]:
    """Names of the ``__kernel`` functions in ``source`` (each once, in order of appearance;
    TVM's OpenCL codegen declares every kernel before defining it)."""
    return list(dict.fromkeys(_KERNEL_RE.findall(source)))


def opencl_module(module) -> Optional[object]:
    """The OpenCL module among ``module`` and its imports (None: none)."""
    if module.kind == "opencl":
        return module
    for child in module.imports:
        found = opencl_module(child)
        if found is not None:
            return found
    return None


def opencl_source(executable) -> str:
    """The OpenCL C of a ``relax.VMExecutable`` built for an OpenCL target ("" when it has no
    device module)."""
    device_module = opencl_module(executable.mod)
    return str(device_module.inspect_source("cl")) if device_module is not None else ""


_BYTE_PARAM_RE = re.compile(r"__global (u?char)\* restrict ([A-Za-z_][A-Za-z0-9_]*)")
_VLOAD_RE = re.compile(r"vload(2|4|8|16)\(0, ([A-Za-z_][A-Za-z0-9_]*) \+ ")


def aligned_byte_loads(source: str) -> str:
    """``source`` with each ``vloadN(0, p + i)`` from a ``__global char*`` / ``uchar*`` kernel
    parameter ``p`` written as one aligned ``charN`` load, ``*((__global charN*)(p + i))``.

    TVM's OpenCL code generator writes ``vloadN`` only where it has proved the index a multiple of
    ``N`` (its modular-set check before a vector load), and kernel buffers start at the device's base
    address alignment (at least 128 bytes), so the address is ``N``-byte aligned; ``vloadN`` of bytes
    tells the compiler nothing of it, and NVIDIA's compiler loads the bytes one by one. On an H200 the
    int8 ResNet-18's convs (int8 weights read from buffers) ran 10-14% faster with the aligned loads
    (RESULTS.md, 2026-11-30). Float loads are left as they are."""
    out = []
    for chunk in re.split(r"(?=__kernel void )", source):
        body = chunk.find("{")
        signature = (chunk[:body] if body >= 0 else chunk) if chunk.startswith("__kernel void ") else ""
        bytes_params = {name: kind for kind, name in _BYTE_PARAM_RE.findall(signature)}
        if not bytes_params:
            out.append(chunk)
            continue
        pieces, at = [], 0
        for match in _VLOAD_RE.finditer(chunk):
            if match.start() < at or match.group(2) not in bytes_params:
                continue
            end, depth = match.end(), 1  # the index runs to the parenthesis that closes vloadN(
            while depth:
                depth += {"(": 1, ")": -1}.get(chunk[end], 0)
                end += 1
            lanes, name = match.group(1), match.group(2)
            index = chunk[match.end() : end - 1]
            pieces += [chunk[at : match.start()], f"(*((__global {bytes_params[name]}{lanes}*)({name} + {index})))"]
            at = end
        out.append("".join(pieces) + chunk[at:])
    return "".join(out)
