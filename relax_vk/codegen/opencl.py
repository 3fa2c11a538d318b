"""OpenCL C: TVM's own codegen writes it (``target.build.opencl``); this reads it back out of a
compiled executable."""

from __future__ import annotations

import re
from typing import List, Optional

__all__ = ["kernel_names", "opencl_module", "opencl_source"]

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
