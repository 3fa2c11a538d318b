"""Scheduling: dlight rules that give every kernel GPU threads and vectorised texel stores.

Order: TVM's adreno rules for the kernels they recognise (textured NCHW4c conv2d, layout
transforms, pools); then the adreno fallback, which handles any remaining kernel that *writes* a
texture by vectorising the 4-lane texel axis of its store (TVM's texture lowering requires the
store width to equal the texel); then the generic GPU rules (reductions, everything else).
"""

from __future__ import annotations

from typing import List

import tvm
from tvm.s_tir import dlight as dl


def schedule_passes() -> List[tvm.transform.Pass]:
    """The scheduling passes (they need the target to be entered, as dlight reads it)."""
    return [
        dl.ApplyDefaultSchedule(dl.adreno.Conv2d(), dl.adreno.LayoutTransform(), dl.adreno.Pool2D()),
        dl.ApplyDefaultSchedule(dl.adreno.Fallback()),
        dl.ApplyDefaultSchedule(dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()),
    ]
