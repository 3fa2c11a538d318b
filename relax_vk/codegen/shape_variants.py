"""Shape variants: a model with run-time dims, also built fixed to a few declared sizes.

One artifact of run-time dims runs every size in its ranges with kernels written for any size
(NCHW buffers, :mod:`relax_vk.schedules.run_time_conv`). At a size the app runs most (a camera's
224x224, a detector's 640x640) a build fixed to that size is faster: its tensors are packed into
textures and its convs take the tuned NCHW4c schedules (ResNet-18 at 224 on an H200: 2.2-2.8x
faster fixed). Like TensorRT's optimization profiles (min / opt / max) and the issue's "specialized
variants for shape buckets, with a generic kernel always present", ``build(..., specialize=[{"H":
224, "W": 224}])`` (CLI ``--specialize H=224,W=224``) builds the model once more per declared size,
every dim fixed, and the artifact carries each such build inside it
(:func:`relax_vk.serialization.artifact.with_variants`). A session loads them all at once; a run
whose dims equal a variant's runs that variant's program, any other run the generic one. Nothing is
compiled or allocated at a run: each variant holds its own storage (the cost: its intermediates'
bytes beside the generic program's).

:func:`specialize` writes the fixed module: ``main``'s input dims bound to the values, the dims it
derives from them (a stepped dim's quotient) bound to theirs, and the range attributes dropped.
"""

from __future__ import annotations

from typing import Dict, Mapping

import tvm
from tvm import relax, tirx
from tvm.sym import Analyzer

from ..core.dims import LOWER_ATTR, STEP_ATTR, UPPER_ATTR
from .run_time_shapes import RunTimeDims, derived_dims, substitute


def input_dims(mod: tvm.IRModule) -> Dict[str, tuple]:
    """``{name: (min, max, step)}`` of the run-time dims ``mod``'s inputs name (what a run binds)."""
    return {d.name: (d.min, d.max, d.step) for d in RunTimeDims(mod["main"]).dims}


def check_values(dims: Mapping[str, tuple], values: Mapping[str, int]) -> Dict[str, int]:
    """``values`` (``{dim: size}``, one per run-time dim) checked against ``dims`` (:func:`input_dims`):
    a ValueError names a dim missing, unknown, outside its range or off its step."""
    if not dims:
        raise ValueError("the model has no run-time dims: there is nothing to specialize")
    unknown = sorted(set(values) - set(dims))
    if unknown:
        raise ValueError(f"specialize {dict(values)}: {', '.join(unknown)} is no run-time dim of the model (its dims: {', '.join(dims)})")
    missing = [n for n in dims if n not in values]
    if missing:
        raise ValueError(f"specialize {dict(values)}: give every run-time dim a value; {', '.join(missing)} has none")
    out = {}
    for name, (lo, hi, step) in dims.items():
        v = values[name]
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"specialize: dim {name} = {v!r} is not an integer")
        if not lo <= v <= hi:
            raise ValueError(f"specialize: dim {name} = {v} is outside its declared range {lo}..{hi}")
        if v % step:
            raise ValueError(f"specialize: dim {name} = {v} is not a multiple of its step {step}")
        out[name] = int(v)
    return out


def specialize(mod: tvm.IRModule, values: Mapping[str, int]) -> tvm.IRModule:
    """``mod`` with every run-time dim of ``main`` fixed to ``values`` (checked by
    :func:`check_values`), ready for a fixed-shape build (module docstring)."""
    main = mod["main"]
    checked = check_values(input_dims(mod), values)
    by_name = {d.name: d.var for d in RunTimeDims(main).dims}
    bound = {by_name[n]: tirx.const(v, by_name[n].ty.dtype) for n, v in checked.items()}
    analyzer = Analyzer()
    binding: Dict[object, int] = {var: int(c) for var, c in bound.items()}
    for var, expr in derived_dims(main).items():  # (a stepped dim's quotient: H_div32 = H // 32)
        value = analyzer.simplify(substitute(expr, bound))
        if not isinstance(value, tvm.ir.prim.expr.IntImm):
            raise ValueError(f"specialize {checked}: the derived dim {var.name} = {expr} is not a number")
        binding[var] = int(value)
    out = relax.transform.BindSymbolicVars({var: value for var, value in binding.items()}, "main")(mod)
    fixed = out["main"]
    for attr in (UPPER_ATTR, LOWER_ATTR, STEP_ATTR):
        if fixed.attrs is not None and attr in fixed.attrs:
            fixed = fixed.without_attr(attr)
    result = tvm.IRModule(dict(out.functions_items()), attrs=out.attrs)
    result["main"] = fixed
    # kernels main's import made over its dims themselves (a quantized matmul's call_te): their
    # buffers fixed too, or FuseTIR maps one argument to buffers of two shapes
    values = {var.name: value for var, value in binding.items()}
    for gvar, func in list(result.functions_items()):
        axes = _dim_axes(func, values) if isinstance(func, tirx.PrimFunc) else None
        if axes:
            result[gvar] = _fixed_kernel(func, axes, values)
    return relax.transform.Normalize()(result)


def _dim_axes(func: tirx.PrimFunc, values: Mapping[str, int]) -> set:
    """The variables named like a dim that are axes of ``func``'s parameter buffers."""
    return {d for p in func.params for d in getattr(p.ty, "shape", None) or () if isinstance(d, tirx.Var) and d.name in values}


def _fixed_kernel(func: tirx.PrimFunc, axes: set, values: Mapping[str, int]) -> tirx.PrimFunc:
    """``func`` with each of ``axes`` (:func:`_dim_axes`) replaced by its value."""
    import tvm_ffi

    def fix(var):
        return tirx.const(values[var.name], var.ty.dtype) if var in axes else var

    return tvm_ffi.structural_map(func, [(tirx.Var, fix)])
