"""Run-time dims on a Relax module: the ranges of ``main``'s symbolic input sizes.

A front door that keeps an input size symbolic (ONNX ``--input-shape x=1,3,48,W --dim W=32:1280``,
PyTorch ``torch.export.Dim``) records its inclusive range on ``main`` in TVM's function attributes
``tir_var_lower_bound`` / ``tir_var_upper_bound`` (TVM's memory planner reads the upper one);
:mod:`relax_vk.codegen.run_time_shapes` reads both when it writes the artifact.
"""

from __future__ import annotations

from typing import Dict, Mapping, Tuple

import tvm

UPPER_ATTR = "tir_var_upper_bound"
LOWER_ATTR = "tir_var_lower_bound"


def dim_ranges(func) -> Dict[str, Tuple[int, int]]:
    """``{name: (min, max)}`` that :func:`with_dim_ranges` recorded on ``func`` (empty: none); a dim
    without a lower bound starts at 0."""
    attrs = func.attrs if func is not None and func.attrs is not None else {}
    if UPPER_ATTR not in attrs:
        return {}
    lower = {str(k): int(v) for k, v in attrs[LOWER_ATTR].items()} if LOWER_ATTR in attrs else {}
    return {str(k): (lower.get(str(k), 0), int(hi)) for k, hi in attrs[UPPER_ATTR].items()}


def with_dim_ranges(mod: tvm.IRModule, dims: Mapping[str, Tuple[int, int]]) -> tvm.IRModule:
    """``mod`` with ``dims`` (``{name: (min, max)}``) recorded on ``main`` (the module is copied)."""
    for name, (lo, hi) in dims.items():
        if not 1 <= int(lo) <= int(hi):
            raise ValueError(f"dim {name}: range {lo}..{hi} is empty or holds sizes below 1")
    main = mod["main"]
    main = main.with_attr(UPPER_ATTR, {k: int(hi) for k, (_, hi) in dims.items()})
    main = main.with_attr(LOWER_ATTR, {k: int(lo) for k, (lo, _) in dims.items()})
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = main
    return out
