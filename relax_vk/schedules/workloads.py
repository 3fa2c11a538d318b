"""The conv2d calls of a Relax module and the workload keys the conv schedule gives them.

The tuner (:mod:`relax_vk.tools.tune`) builds candidates per distinct call, and the cost-based
scope decision (:mod:`relax_vk.passes.scope.choose_memory_kind`) looks each call's workload up in
the tuning database. Both read calls from the module itself: before the layout stage (NCHW data,
OIHW weights) or after it (NCHW4c data, OIHW4o weights: channels packed by 4), with the same
result. :func:`conv_workload` is what :func:`relax_vk.schedules.conv2d.workload` reads from the
kernel, computed from the call (tests check they agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import tvm
from tvm import relax

from .conv2d import Conv2dWorkload


@dataclass(frozen=True)
class ConvSpec:
    """A conv2d as the model calls it, in NCHW / OIHW terms (``padding``: top, left, bottom, right)."""

    data: Tuple[int, ...]
    weight: Tuple[int, ...]
    strides: Tuple[int, int]
    padding: Tuple[int, int, int, int]
    dilation: Tuple[int, int]
    groups: int

    def to_json(self) -> dict:
        return {"data": list(self.data), "weight": list(self.weight), "strides": list(self.strides),
                "padding": list(self.padding), "dilation": list(self.dilation), "groups": self.groups}  # fmt: skip


def _static(ty, dtypes=("float32",)) -> Optional[Tuple[int, ...]]:
    if not isinstance(ty, relax.TensorType) or ty.shape is None or str(ty.dtype) not in dtypes:
        return None
    try:
        return tuple(int(d) for d in ty.shape.values)
    except (TypeError, ValueError, AttributeError):
        return None


def _spec(call: relax.Call) -> Optional[ConvSpec]:
    a = call.attrs
    # (an int8 weight: a quantized conv, the same workload as its float form)
    data, weight = _static(call.args[0].ty), _static(call.args[1].ty, ("float32", "int8"))
    if data is None or weight is None:
        return None
    layouts = (str(a.data_layout), str(a.kernel_layout))
    if layouts == ("NCHW4c", "OIHW4o") and len(data) == 5 and len(weight) == 5:
        data = (data[0], data[1] * 4, data[2], data[3])
        weight = (weight[0] * 4, weight[1], weight[2], weight[3])
    elif layouts != ("NCHW", "OIHW") or len(data) != 4 or len(weight) != 4:
        return None
    pad = [int(p) for p in a.padding]
    pad = pad * 2 if len(pad) == 2 else pad
    return ConvSpec(data, weight, tuple(int(s) for s in a.strides), tuple(pad), tuple(int(d) for d in a.dilation), int(a.groups))


def conv_calls(mod: tvm.IRModule) -> List[ConvSpec]:
    """Every static-shape float32 conv2d call of the module's Relax functions, in order (repeats kept)."""
    op = tvm.ir.Op.get("relax.nn.conv2d")
    found: List[ConvSpec] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and expr.op.same_as(op):
            spec = _spec(expr)
            if spec is not None:
                found.append(spec)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return found


def collect_convs(mod: tvm.IRModule) -> List[ConvSpec]:
    """The distinct conv2d calls (:func:`conv_calls` without repeats)."""
    return list(dict.fromkeys(conv_calls(mod)))


def conv_workload(spec: ConvSpec) -> Optional[Conv2dWorkload]:
    """The workload the conv schedule sees for this call, or None for a conv it does not take
    (grouped convs other than depthwise, unequal strides or dilations)."""
    n, c, h, w = spec.data
    o, cg, kh, kw = spec.weight
    if spec.strides[0] != spec.strides[1] or spec.dilation[0] != spec.dilation[1]:
        return None
    pt, pl, pb, pr = spec.padding
    out_h = (h + pt + pb - spec.dilation[0] * (kh - 1) - 1) // spec.strides[0] + 1
    out_w = (w + pl + pr - spec.dilation[1] * (kw - 1) - 1) // spec.strides[1] + 1
    chunks = -(-c // 4)  # (a packed call's channels are already whole texels)
    depthwise = spec.groups > 1 and cg == 1 and -(-spec.groups // 4) == chunks and -(-o // 4) == chunks
    if spec.groups > 1 and not depthwise:
        return None
    ic = 1 if depthwise else -(-cg // 4) * 4
    return Conv2dWorkload(n, -(-o // 4), out_h, out_w, ic, kh, kw, depthwise, spec.strides[0], spec.dilation[0])


def workload_counts(mod: tvm.IRModule) -> Dict[str, int]:
    """``{workload key: calls}`` over the module's convs that the conv schedule takes."""
    counts: Dict[str, int] = {}
    for spec in conv_calls(mod):
        w = conv_workload(spec)
        if w is not None:
            counts[w.key()] = counts.get(w.key(), 0) + 1
    return counts


def model_fingerprint(mod: tvm.IRModule) -> str:
    """A short digest of a model's structure: every call of ``main`` (its op or callee name and
    output shape, in order) and its conv workloads. It keys whole-model plan measurements in the
    tuning database: a model matches one only if it has the same ops on the same shapes."""
    import hashlib

    parts = [f"{k}x{n}" for k, n in sorted(workload_counts(mod).items())]
    main = mod["main"] if "main" in [gv.name_hint for gv in mod.get_global_vars()] else None
    if main is not None:

        def visit(expr) -> None:
            if isinstance(expr, relax.Call):
                op = expr.op.name if hasattr(expr.op, "name") else getattr(expr.op, "name_hint", type(expr.op).__name__)
                parts.append(f"{op}:{getattr(expr, 'ty', None)}")

        relax.analysis.post_order_visit(main.body, visit)
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]
