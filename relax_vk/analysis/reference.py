"""CPU reference execution: run any relax_vk module (scoped or not) with TVM's llvm target.

``strip_scopes`` maps every memory scope back to a plain CPU buffer (VDevices dropped, hints and
``to_vdevice`` copies become the identity), so a scoped module computes exactly what the original
did. Tests use it to show the passes keep semantics; ``run_on_cpu`` is also the reference for
checking device results. :func:`reference_outputs` reads the output of every named model op
(:data:`~relax_vk.core.provenance.MODEL_OPS_ATTR`) of a module as imported: what fp16 calibration
(:mod:`.fp16_range`) and ``relax-vk bisect`` (:mod:`relax_vk.tools.bisect`) compare against.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ..core.provenance import model_op_names
from ..legalize import LEGALIZE_MAP
from ..passes.layout.bool_arithmetic import BoolArithmetic
from ..passes.layout.self_comparisons import NaNSelfComparisons

_IDENTITY_OPS = ("relax.to_vdevice", "relax.hint_on_device")


def _plain(ty):
    if isinstance(ty, relax.TensorType):
        return relax.TensorType(ty.shape, ty.dtype) if ty.shape is not None else relax.TensorType(ndim=ty.ndim, dtype=ty.dtype)
    if isinstance(ty, relax.TupleType):
        return relax.TupleType([_plain(f) for f in ty.fields])
    return ty


@relax.expr_functor.mutator
class _Stripper(relax.PyExprMutator):
    def visit_var_binding_(self, binding):
        value = binding.value
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in _IDENTITY_OPS:
            self.set_var_remap(binding.var, self.visit_expr(value.args[0]))
            return
        super().visit_var_binding_(binding)

    def visit_call_(self, call):
        args = [self.visit_expr(a) for a in call.args]
        op = call.op
        if isinstance(op, tvm.ir.Op) and op.name == "relax.call_tir":
            ty_args = [_plain(t) for t in call.ty_args]
        elif isinstance(op, tvm.ir.Op) and len(call.ty_args) and any(
            isinstance(t, relax.TensorType) and t.vdevice is not None for t in call.ty_args
        ):
            ty_args = []
        else:
            ty_args = list(call.ty_args)
        return relax.Call(self.visit_expr(op) if not isinstance(op, tvm.ir.Op) else op, args, call.attrs, ty_args)

    def visit_generic_const_(self, const):
        return GenericConst(const.value, _plain(const.ty))


def strip_scopes(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every VDevice removed (see module docstring)."""
    out = {}
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            params = [relax.Var(p.name, _plain(p.ty)) for p in func.params]
            bound = func.bind_params(dict(zip(func.params, params))) if params else func
            body = _Stripper(mod).visit_expr(bound.body)
            func = relax.Function(params, body, None, func.is_pure, func.attrs, func.span)
        out[gvar] = func
    return tvm.IRModule(out, attrs=mod.attrs)


def _cpu_kernels(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each hand-scheduled GPU kernel replaced by its serial CPU form."""
    from ..schedules.cpu_forms import cpu_form

    forms = {gvar: cpu_form(func) for gvar, func in mod.functions_items() if isinstance(func, tvm.tirx.PrimFunc)}
    swaps = {gvar: form for gvar, form in forms.items() if form is not None}
    if not swaps:
        return mod
    out = mod.clone()
    for gvar, form in swaps.items():
        out[gvar] = form
    return out


def build_on_cpu(mod: tvm.IRModule):
    """Legalize (with relax_vk's packed-op legalizers) and compile ``mod`` for llvm (hand-scheduled
    GPU kernels, llvm cannot compile them, run in their CPU forms)."""
    mod = _cpu_kernels(strip_scopes(mod))
    # (as the GPU pipeline: TVM's llvm build folds x == x to true and refuses a product of bools)
    mod = BoolArithmetic()(NaNSelfComparisons()(mod))
    mod = relax.transform.LegalizeOps(LEGALIZE_MAP)(mod)
    return tvm.compile(mod, target="llvm")


def _at_input_sizes(mod: tvm.IRModule, inputs: Sequence[np.ndarray], func: str) -> tvm.IRModule:
    """``mod`` with ``mod[func]``'s run-time dims bound to the inputs' sizes where a dim has a step
    (an input axis ``8 * H_div8``, or ``H`` matched to ``H_div8``): TVM's VM derives a symbolic
    variable from an input's shape only where the axis is the variable itself (its shape lowering
    failed: ``slot_map_``). Other modules are returned as they are."""
    from tvm import tirx

    from ..core.dims import dim_steps

    f = mod[func]
    values, stepped = {}, bool(dim_steps(f))  # (an import's stepped dims)
    for p, x in zip(f.params, inputs):
        shape = getattr(getattr(p, "ty", None), "shape", None)
        for d, n in zip(getattr(shape, "values", ()), np.shape(x)):
            if isinstance(d, tirx.Var):
                values[d] = int(n)
            elif isinstance(d, tirx.Mul):
                var, c = (d.a, d.b) if isinstance(d.a, tirx.Var) else (d.b, d.a)
                if isinstance(var, tirx.Var) and isinstance(c, tirx.IntImm) and int(c.value):
                    values[var], stepped = int(n) // int(c.value), True
    if not stepped:
        return mod
    out = mod.clone()
    out[func] = f.bind_symbolic_vars(values)
    return out


def run_on_cpu(mod: tvm.IRModule, inputs: Sequence[np.ndarray], func: str = "main") -> List[np.ndarray]:
    """Run ``mod[func]`` on the CPU and return its outputs as numpy arrays (a tuple result is flattened)."""
    exe = build_on_cpu(_at_input_sizes(mod, inputs, func))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    result = vm[func](*[tvm.runtime.tensor(np.asarray(x, order="C")) for x in inputs])  # (a 0-d input stays 0-d)
    return _flatten(result)


def _flatten(value) -> List[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out: List[np.ndarray] = []
    for item in value:
        out += _flatten(item)
    return out


def random_inputs(mod: tvm.IRModule, func: str = "main", seed: int = 0) -> List[np.ndarray]:
    """Seeded random inputs matching ``mod[func]``'s parameters, run-time dims at the upper bound of
    their declared range (:meth:`relax_vk.codegen.run_time_shapes.RunTimeDims.at_max`).

    The first parameter (the data) is standard normal; every other float parameter (weights,
    biases) is normal with variance ``1 / fan_in`` (``fan_in`` = the product of all but the first
    axis), as initialised networks are, so activations stay O(1) through deep models and float32
    comparisons at 1e-4 tolerances measure the kernels, not summation-order noise on values in the
    thousands. Integers are in -8..7, within the rows of a table they index
    (:func:`~relax_vk.passes.layout.index_ranges.index_ranges`)."""
    from ..codegen.run_time_shapes import RunTimeDims

    rng = np.random.default_rng(seed)
    dims = RunTimeDims(mod[func])
    try:  # integers that index a table are drawn within it (the runtime refuses the others)
        from ..passes.layout.index_ranges import index_ranges, range_pairs

        ranges = index_ranges(mod[func], mod)
    except Exception:  # noqa: BLE001 (a module the analysis cannot read: the plain draw)
        ranges = {}
    arrays = []
    for i, p in enumerate(mod[func].params):
        ty = p.ty
        shape = [dims.at_max(d, f"input {p.name}") for d in ty.shape.values]
        if str(ty.dtype).startswith("float"):
            fan_in = int(np.prod(shape[1:])) if (i > 0 and len(shape) > 1) else 1
            arrays.append((rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))).astype(str(ty.dtype)))
        elif str(ty.dtype) == "bool":
            arrays.append(rng.integers(0, 2, shape).astype("bool"))
        else:
            r = ranges.get(p.name)
            pairs = range_pairs(r) if r is not None else [[-8, 7]]
            lo, hi = max(max(q[0] for q in pairs), -8), min(min(q[1] for q in pairs), 7)
            arrays.append(rng.integers(lo, hi + 1, shape).astype(str(ty.dtype)) if lo <= hi else rng.integers(-8, 8, shape).astype(str(ty.dtype)))
    return arrays


def model_outputs(mod) -> Dict[str, object]:
    """Model op -> the variable of its output in the imported ``main`` (the last binding its
    conversion made), in model order."""
    main = mod["main"]
    names = model_op_names(main)
    out: Dict[str, object] = {}
    for block in main.body.blocks:
        for b in block.bindings:
            op = names.get(b.var.name)
            if op is not None:
                out.pop(str(op), None)
                out[str(op)] = b.var
    return out


def reference_outputs(mod, inputs: Sequence[np.ndarray], ops: Sequence[str]) -> Dict[str, np.ndarray]:
    """The output of each of ``ops`` (model op names) on the CPU (TVM llvm): ``main`` made to
    return them all."""
    wanted = model_outputs(mod)
    ops = [op for op in ops if op in wanted and isinstance(wanted[op].ty, relax.TensorType)]
    if not ops:
        return {}
    flat = relax.transform.ToNonDataflow()(mod)
    main = flat["main"]
    by_name = {b.var.name: b.var for block in main.body.blocks for b in block.bindings}
    fields = [by_name[wanted[op].name] for op in ops]
    result = relax.Tuple(fields)
    ret = relax.TupleType([f.ty for f in fields])
    probe = flat.clone()
    probe["main"] = relax.Function(main.params, relax.SeqExpr(main.body.blocks, result), ret, main.is_pure, main.attrs)
    probe = relax.transform.Normalize()(probe)
    values = run_on_cpu(probe, inputs)
    return dict(zip(ops, values))
