"""Calibration for half arithmetic: which of a model's ops produce values float16 cannot hold.

:func:`overflowing_ops` runs the model as imported on the CPU (TVM llvm, the reference
``relax-vk bisect`` compares with) on calibration inputs -- the caller's, else seeded ones
(:func:`relax_vk.analysis.reference.random_inputs`) -- and reads every model op's output. An op whose
output exceeds float16's range (|x| > 65504 / ``margin``, or non-finite where the reference is
finite) overflows in half; so do the ops that read it (they would read it as half), and the ops
that read a calibration input past that range (a half texel of the input saturated: 0.67 off, or
inf). The result
(op -> the magnitude seen) goes into :class:`~relax_vk.passes.lower.half_arithmetic.HalfPolicy`
``overflow``: :func:`relax_vk.build` keeps those ops' kernels in float32 arithmetic. It is the
mechanism of ``relax-vk bisect --fp16`` run ahead of time: bisect finds an fp16 overflow after the
fact, calibration keeps it from happening.
"""

from __future__ import annotations

import hashlib
from typing import Dict, Optional, Sequence

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

from ..core.provenance import MODEL_OPS_ATTR, model_op_names
from ..passes.lower.half_arithmetic import HALF_MAX, input_key
from .reference import model_outputs, random_inputs, reference_outputs

#: values within a factor MARGIN of float16's largest count as overflowing (other inputs than the
#: calibration run's reach a little further)
MARGIN = 2.0
_SEEN: Dict[tuple, Dict[str, float]] = {}  # the last few calibrations, by model and inputs


def _peak(value: np.ndarray) -> float:
    """The largest magnitude in ``value`` (``inf`` where any is not finite)."""
    return float(np.max(np.abs(value))) if np.all(np.isfinite(value)) else float("inf")


def _readers(mod: tvm.IRModule) -> Dict[str, set]:
    """Model op -> the model ops whose bindings read its values (in the imported ``main``); the
    model's ``i``-th input is the op :func:`~relax_vk.passes.lower.half_arithmetic.input_key` ``(i)``."""
    main = mod["main"]
    names = model_op_names(main)
    op_of: Dict[str, str] = {p.name: input_key(i) for i, p in enumerate(main.params)}
    readers: Dict[str, set] = {}
    for block in main.body.blocks:
        for b in block.bindings:
            op = names.get(b.var.name)
            used = []
            relax.analysis.post_order_visit(b.value, lambda e: used.append(e.name) if isinstance(e, relax.Var) else None)
            for name in used:
                src = op_of.get(name)
                if src is not None and op is not None and str(op) != src:
                    readers.setdefault(src, set()).add(str(op))
            if op is not None:
                op_of[b.var.name] = str(op)
    return readers


def overflowing_ops(mod: tvm.IRModule, inputs: Optional[Sequence[np.ndarray]] = None, margin: float = MARGIN) -> Dict[str, float]:
    """Model op -> the largest magnitude of its output (``inf``: non-finite) for every op of
    ``mod`` (imported by :mod:`relax_vk.frontends`: its ops are named) whose output float16
    cannot hold, and the ops reading such an output (with the magnitude they read); an input past
    the range appears under :func:`~relax_vk.passes.lower.half_arithmetic.input_key`, and the ops
    reading it with its magnitude. Empty for a module whose ops are not named."""
    if MODEL_OPS_ATTR not in (mod["main"].attrs or {}):
        return {}
    inputs = list(inputs) if inputs is not None else random_inputs(mod)
    key = (tvm_ffi.structural_hash(mod), tuple(hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest() for a in inputs), margin)
    if key in _SEEN:  # (a CPU build of the model: builds of one model for several targets or plans share it)
        return dict(_SEEN[key])
    order = list(model_outputs(mod))
    found: Dict[str, float] = {}
    for op, value in reference_outputs(mod, inputs, order).items():
        if not np.issubdtype(value.dtype, np.floating) or not value.size:
            continue
        peak = _peak(value)
        if peak > HALF_MAX / margin:
            found[op] = peak
    readers = _readers(mod)
    for i, value in enumerate(inputs):  # an input past the range is read as half by the ops reading it
        value = np.asarray(value)
        if np.issubdtype(value.dtype, np.floating) and value.size:
            peak = _peak(value)
            if peak > HALF_MAX / margin:
                found[input_key(i)] = peak  # (its packing keeps float32 texels)
                for reader in readers.get(input_key(i), ()):
                    found[reader] = max(found.get(reader, 0.0), peak)
    for op, peak in list(found.items()):
        for reader in readers.get(op, ()):
            found[reader] = max(found.get(reader, 0.0), peak)
    if len(_SEEN) >= 8:
        _SEEN.pop(next(iter(_SEEN)))
    _SEEN[key] = dict(found)
    return found
