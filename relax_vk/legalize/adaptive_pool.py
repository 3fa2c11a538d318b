"""``relax.nn.adaptive_avg_pool2d`` of a map of run-time size, refused by name where no kernel of
relax_vk computes it: its windows change with each run's size, TOPI writes them as reductions of
run-time extent that no schedule fits (the safe schedule's verifier finds a race), and the build
failed deep in scheduling. A global pool (a 1 x 1 output: one window, the whole map) and every
static-size pool go to TVM's legalizer."""

from __future__ import annotations

import tvm
from tvm import relax, tirx

from ..core.errors import UnsupportedError


def legalize_adaptive_avg_pool2d(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    data = call.args[0]
    shape = list(getattr(getattr(data.ty, "shape", None), "values", None) or [])
    out = list(getattr(getattr(call.ty, "shape", None), "values", None) or [])
    spatial = shape[2:4] if len(shape) >= 4 else []
    run_time = any(not isinstance(d, tirx.IntImm) for d in spatial)
    global_pool = len(out) >= 4 and all(isinstance(d, tirx.IntImm) and int(d) == 1 for d in out[2:4])
    if run_time and not global_pool:
        raise UnsupportedError(f"adaptive_avg_pool2d to {[int(d) if isinstance(d, tirx.IntImm) else d for d in out[2:4]]} of a map of "
                               f"run-time size {shape}: only a global pool (output 1 x 1) or a static size")  # fmt: skip
    return tvm.ir.Op.get("relax.nn.adaptive_avg_pool2d").get_attr("FLegalize")(bb, call)
