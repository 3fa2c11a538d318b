"""Run-time dims on a Relax module: the ranges of ``main``'s symbolic input sizes.

A front door that keeps an input size symbolic (ONNX ``--input-shape x=1,3,48,W --dim W=32:1280``,
PyTorch ``torch.export.Dim``) records its inclusive range on ``main`` in TVM's function attributes
``tir_var_lower_bound`` / ``tir_var_upper_bound`` (TVM's memory planner reads the upper one);
:mod:`relax_vk.codegen.run_time_shapes` reads both when it writes the artifact.

A dim may have a **step** (``--dim H=32:960:32``: multiples of 32 only, recorded in
:data:`STEP_ATTR`), for models whose sizes only match at multiples (a detector's FPN adds a 2x
upsampled map to the map it came from). TVM cannot prove ``floordiv(floordiv(H, 16), 2) * 2 ==
floordiv(H, 16)``, so the model is imported over ``H_div32`` (:func:`quotient_name`) with the input
axis ``32 * H_div32``, and :func:`bind_stepped_dims` then gives ``main`` the plain input axis ``H``
back, deriving ``H_div32 = H // 32`` from it by ``R.match_cast``; the runtime refuses a size that is
not a multiple of the step. PyTorch writes such a dim itself (``torch.export``'s ``32 * Dim("h")``:
the input axis is ``32 * s0``); :func:`bind_multiples` renames its symbol to the quotient and binds
it the same way.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

import tvm

UPPER_ATTR = "tir_var_upper_bound"
LOWER_ATTR = "tir_var_lower_bound"
#: ``{name: step}`` of the dims with a step (module docstring)
STEP_ATTR = "relax_vk.dim_steps"
#: a kernel's (PrimFunc's) copy of ``main``'s dim ranges, ``{name: [min, max]}``: what the schedules
#: (a conv's workgroup shape by its map's width at the bound) and the grid fold reason about
KERNEL_RANGES_ATTR = "relax_vk.dim_ranges"

#: a run-time dim's declared range: ``(min, max)`` or ``(min, max, step)``
DimRange = Tuple[int, ...]


def quotient_name(name: str, step: int) -> str:
    """The name of the dim a stepped dim is imported over (``H``, 32 -> ``H_div32``)."""
    return f"{name}_div{step}"


def dim_steps(func) -> Dict[str, int]:
    """``{name: step}`` of ``func``'s dims with a step (empty: none)."""
    attrs = func.attrs if func is not None and func.attrs is not None else {}
    return {str(k): int(v) for k, v in attrs[STEP_ATTR].items()} if STEP_ATTR in attrs else {}


def check_range(name: str, bounds: DimRange) -> Tuple[int, int, int]:
    """``(min, max, step)`` of a declared range, checked (ValueError names the dim)."""
    if len(bounds) not in (2, 3):
        raise ValueError(f"dim {name}: a range is (MIN, MAX) or (MIN, MAX, STEP), not {tuple(bounds)}")
    lo, hi, step = int(bounds[0]), int(bounds[1]), int(bounds[2]) if len(bounds) == 3 else 1
    if not 1 <= lo <= hi:
        raise ValueError(f"dim {name}: range {lo}..{hi} is empty or holds sizes below 1")
    if step < 1 or lo % step or hi % step:
        raise ValueError(f"dim {name}: step {step} must be at least 1 and divide MIN {lo} and MAX {hi}")
    return lo, hi, step


def dim_ranges(func) -> Dict[str, Tuple[int, int]]:
    """``{name: (min, max)}`` that :func:`with_dim_ranges` recorded on ``func`` (empty: none); a dim
    without a lower bound starts at 0."""
    attrs = func.attrs if func is not None and func.attrs is not None else {}
    if UPPER_ATTR not in attrs:
        return {}
    lower = {str(k): int(v) for k, v in attrs[LOWER_ATTR].items()} if LOWER_ATTR in attrs else {}
    return {str(k): (lower.get(str(k), 0), int(hi)) for k, hi in attrs[UPPER_ATTR].items()}


def kernel_ranges(func) -> Optional[Dict[str, Tuple[int, int]]]:
    """``{name: (min, max)}`` a kernel carries (:data:`KERNEL_RANGES_ATTR`), None when it carries none."""
    attrs = func.attrs if func is not None and func.attrs is not None else {}
    if KERNEL_RANGES_ATTR not in attrs:
        return None
    return {str(k): (int(v[0]), int(v[1])) for k, v in attrs[KERNEL_RANGES_ATTR].items()}


def with_kernel_ranges(mod: tvm.IRModule) -> tvm.IRModule:
    """A copy of ``mod`` whose PrimFuncs carry ``main``'s run-time dim ranges (by name,
    :data:`KERNEL_RANGES_ATTR`: the schedules and the grid fold read them); ``mod`` itself when it
    has none."""
    ranges = dim_ranges(mod["main"]) if any(g.name_hint == "main" for g in mod.get_global_vars()) else {}
    if not ranges:
        return mod
    table = {k: list(v) for k, v in ranges.items()}
    functions = {g: f.with_attr(KERNEL_RANGES_ATTR, table) if isinstance(f, tvm.tirx.PrimFunc) else f for g, f in mod.functions_items()}
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)  # (the VDevices live in global_infos)


def bounded_analyzer(variables, ranges: Mapping[str, Tuple[int, int]]):
    """A TVM analyzer that knows each of ``variables`` (``tirx.Var`` run-time dims) lies in its
    range of ``ranges`` (``{name: (min, max)}``, by name); a variable without a range is left free."""
    from tvm import tirx
    from tvm.sym import Analyzer

    analyzer = Analyzer()
    for var in variables:
        if str(var.name) in ranges:
            lo, hi = ranges[str(var.name)]
            analyzer.bind(var, tvm.ir.Range.from_min_extent(tirx.const(int(lo), var.ty.dtype), tirx.const(int(hi) - int(lo) + 1, var.ty.dtype)))
    return analyzer


#: the most sizes (over every dim an expression reads) a front door tries one by one where TVM's
#: analyzer proves nothing (:func:`size_cases`)
MOST_SIZE_CASES = 4096


def size_cases(expressions, ranges: Mapping[str, Tuple[int, int]], most: int = MOST_SIZE_CASES):
    """``(count, cases)``: how many sizes the run-time dims that ``expressions`` read take over
    their ``ranges`` (None when one has no range), and each as ``{tirx.Var: tirx.IntImm}`` (None
    when there are more than ``most``, or a dim has no range)."""
    import itertools

    from tvm import tirx

    variables: Dict[str, "tirx.Var"] = {}
    for e in expressions:
        for v in tirx.analysis.undefined_vars(e):
            variables.setdefault(str(v.name), v)
    if any(n not in ranges for n in variables):
        return None, None
    spans = [range(ranges[n][0], ranges[n][1] + 1) for n in variables]
    count = 1
    for span in spans:
        count *= len(span)
    if count > most:
        return count, None
    dims = list(variables.values())
    return count, [{v: tirx.const(x, v.ty.dtype) for v, x in zip(dims, values)} for values in itertools.product(*spans)]


def largest_value(value, ranges: Mapping[str, Tuple[int, int]]) -> Optional[int]:
    """The largest value of the integer expression ``value`` of run-time dims over their
    ``ranges`` (``{name: (min, max)}``, as :func:`dim_ranges` gives); None when a dim of it has no
    range or the bound is not finite."""
    from tvm import tirx

    variables = tirx.analysis.undefined_vars(value)
    if any(str(var.name) not in ranges for var in variables):
        return None
    top = bounded_analyzer(variables, ranges).const_int_bound(value).max_value
    return int(top) if top < (1 << 62) else None


def with_dim_ranges(mod: tvm.IRModule, dims: Mapping[str, DimRange]) -> tvm.IRModule:
    """``mod`` with ``dims`` (``{name: (min, max)}`` or ``(min, max, step)``) recorded on ``main``
    (the module is copied)."""
    checked = {name: check_range(name, bounds) for name, bounds in dims.items()}
    main = mod["main"]
    main = main.with_attr(UPPER_ATTR, {k: hi for k, (_, hi, _) in checked.items()})
    main = main.with_attr(LOWER_ATTR, {k: lo for k, (lo, _, _) in checked.items()})
    steps = {k: step for k, (_, _, step) in checked.items() if step > 1}
    if steps:
        main = main.with_attr(STEP_ATTR, steps)
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = main
    return out


def bind_single_valued_dims(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each run-time dim whose range holds one value (``--dim B=2:2``, what
    ``torch.export`` derives for a ``Dim.AUTO`` it specializes) replaced by that value in ``main``
    and its range dropped: a fixed size, as if declared so. (Left symbolic, TVM's analysis folded
    it to the constant in some places and not others, and the artifact was refused at load: "dim B
    is no input's axis".) ``mod`` itself when no such dim exists."""
    from tvm import tirx

    main = mod["main"]
    ranges = dim_ranges(main)
    fixed = {name: lo for name, (lo, hi) in ranges.items() if lo == hi}
    if not fixed:
        return mod
    found: Dict[str, tirx.Var] = {}
    for p in main.params:
        for axis in getattr(getattr(p.ty, "shape", None), "values", None) or ():
            for var in tirx.analysis.undefined_vars(axis):
                found.setdefault(str(var.name), var)
    binding = {found[name]: tirx.const(value, found[name].ty.dtype) for name, value in fixed.items() if name in found}
    main = main.bind_symbolic_vars(binding) if binding else main
    attrs = main.attrs
    for key in (UPPER_ATTR, LOWER_ATTR, STEP_ATTR):
        if attrs is not None and key in attrs:
            kept = {str(k): int(v) for k, v in attrs[key].items() if str(k) not in fixed}
            main = main.with_attr(key, kept) if kept else main.without_attr(key)
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs, global_infos=mod.global_infos)
    out["main"] = main
    return out


def bind_stepped_dims(mod: tvm.IRModule, steps: Mapping[str, int], quotient_names: Optional[Mapping[str, str]] = None) -> tvm.IRModule:
    """``mod`` imported over the quotients of the stepped dims ``{name: step}`` (an input axis
    ``step * name_divSTEP``), with ``main`` taking the plain axis ``name`` again and deriving
    ``name_divSTEP = name // step`` from it (module docstring). ``quotient_names``: ``{name: the
    quotient's name}`` where it is not :func:`quotient_name`'s. Ranges are recorded by the caller."""
    from tvm import relax, tirx

    main = mod["main"]
    users: Dict[str, tirx.Var] = {}
    quotients: Dict[str, tirx.Var] = {}

    def plain(axis):
        if isinstance(axis, tirx.Mul):
            for c, v in ((axis.a, axis.b), (axis.b, axis.a)):
                if isinstance(c, tirx.IntImm) and isinstance(v, tirx.Var):
                    for name, step in steps.items():
                        if str(v.name) == (quotient_names or {}).get(name, quotient_name(name, step)) and int(c) == step:
                            quotients[name] = v
                            return users.setdefault(name, tirx.Var(name, v.ty.dtype))
        return axis

    params, casts = [], []
    for p in main.params:
        ty = p.ty
        shape = getattr(getattr(ty, "shape", None), "values", None)
        new = [plain(a) for a in shape] if shape is not None else None
        if new is None or all(a.same_as(b) for a, b in zip(new, shape)):
            params.append(p)
            continue
        q = relax.Var(p.name, relax.TensorType(new, ty.dtype))
        params.append(q)
        casts.append(relax.MatchCast(p, q, ty))
    if not casts:
        return mod
    names = sorted(quotients)
    derive = relax.MatchCast(relax.Var("stepped_dims", relax.ShapeType([quotients[n] for n in names])),
                             relax.ShapeExpr([tirx.floordiv(users[n], steps[n]) for n in names]), relax.ShapeType([quotients[n] for n in names]))  # fmt: skip
    body = main.body
    blocks = [relax.BindingBlock([derive] + casts)] + list(body.blocks)
    func = relax.Function(params, relax.SeqExpr(blocks, body.body), body.ty, main.is_pure, main.attrs, main.span)
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = func
    return relax.transform.Normalize()(out)


def bind_multiples(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` whose ``main`` takes input axes ``step * v`` (``v`` a symbolic dim with a recorded
    range, as TVM's PyTorch importer writes ``torch.export``'s ``32 * Dim("h")``) bound as stepped
    dims by :func:`bind_stepped_dims`: ``main`` takes the plain axis, a dim named ``v_xSTEP`` with
    range ``step * range(v)`` and that step, and derives ``v`` from it. A dim used with two
    different steps is a ValueError naming it; a module without such axes is returned as it is."""
    from tvm import tirx

    main = mod["main"]
    steps: Dict[str, int] = {}
    for p in main.params:
        for axis in getattr(getattr(p.ty, "shape", None), "values", None) or ():
            if not isinstance(axis, tirx.Mul):
                continue
            for c, v in ((axis.a, axis.b), (axis.b, axis.a)):
                if isinstance(c, tirx.IntImm) and isinstance(v, tirx.Var) and int(c) > 1:
                    name = str(v.name)
                    if steps.get(name, int(c)) != int(c):
                        raise ValueError(f"dim {name} is used as {steps[name]} * {name} and {int(c)} * {name}; one step per dim")
                    steps[name] = int(c)
    if not steps:
        return mod
    ranges = dim_ranges(main)
    missing = [n for n in steps if n not in ranges]
    if missing:
        raise ValueError(f"dim {', '.join(missing)}: a multiple of it is an input axis but it has no declared range")
    plain = {f"{name}_x{step}": (name, step) for name, step in steps.items()}
    out = bind_stepped_dims(mod, {p: step for p, (_, step) in plain.items()}, {p: name for p, (name, _) in plain.items()})
    dims: Dict[str, DimRange] = dict(ranges)
    for p, (name, step) in plain.items():
        lo, hi = ranges[name]
        dims[name] = (max(lo, 1), hi)
        dims[p] = (max(lo, 1) * step, hi * step, step)
    return with_dim_ranges(out, dims)


def refuse_conditional_sizes(mod: tvm.IRModule) -> None:
    """Raise :class:`~relax_vk.core.errors.UnsupportedError` naming the first op of ``mod`` whose
    result's size is a condition on the run-time dims (``if_then_else``: TVM writes a ceil-mode
    pool's output size over a run-time input so): no pass or runtime here computes such a size (it
    crashed TVM's type normalizer in a later pass)."""
    from tvm import relax

    from .errors import UnsupportedError
    from .provenance import model_op_names

    def conditional(e) -> bool:
        if isinstance(e, tvm.ir.Call):  # (if_then_else; TVM 0.27's PrimExpr calls are ir.Call)
            return True
        return any(conditional(getattr(e, f)) for f in ("a", "b", "value") if isinstance(getattr(e, f, None), tvm.ir.Expr))

    for gvar, func in mod.functions_items():
        if not isinstance(func, relax.Function):
            continue
        names = model_op_names(func)
        for block in getattr(func.body, "blocks", []):
            for b in block.bindings:
                ty = b.var.ty
                shapes = [ty] if isinstance(ty, relax.TensorType) else list(getattr(ty, "fields", []))
                for t in shapes:
                    values = getattr(getattr(t, "shape", None), "values", None) or []
                    if any(conditional(v) for v in values):
                        op = getattr(getattr(b.value, "op", None), "name", type(b.value).__name__)
                        model_op = f", model op {names[b.var.name]}" if b.var.name in names else ""
                        raise UnsupportedError(f"{gvar.name_hint}: {op} ({b.var.name}{model_op}) gives a size that is a condition on the run-time dims "
                                               f"{list(values)} (a ceil-mode pool over a run-time size, say): not supported; declaring the dims with a "
                                               "step of the pool's stride (--dim H=8:640:2, dims={'H': (8, 640, 2)}, torch.export's 2 * Dim('h')) "
                                               "gives the size one form")  # fmt: skip
