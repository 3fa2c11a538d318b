"""Scheduling: dlight rules that give every kernel GPU threads and vectorised texel stores.

Order: relax_vk's pool schedule (:mod:`relax_vk.schedules.pooling`); TVM's adreno rules for textured
NCHW4c conv2d and layout transforms; the adreno fallback, which handles any
remaining kernel that *writes* a texture by vectorising its 4-lane texel axis (TVM's texture
lowering requires the store width to equal the texel); then the generic GPU rules (reductions,
everything else). TVM's adreno pool rule is not used: its kernels accumulate four texel lanes
into a one-element local buffer (wrong numbers on pocl).

TVM 0.27 then scalarises every vectorised texture store during lowering; relax_vk's TIR pipeline
repairs them (:mod:`relax_vk.codegen.texture_stores`).
"""

from __future__ import annotations

from typing import List

import tvm
from tvm.s_tir import dlight as dl

from .pooling import SchedulePools


def schedule_passes() -> List[tvm.transform.Pass]:
    """The scheduling passes (they need the target to be entered, as dlight reads it)."""
    return [
        SchedulePools(),
        dl.ApplyDefaultSchedule(dl.adreno.Conv2d(), dl.adreno.LayoutTransform()),
        dl.ApplyDefaultSchedule(dl.adreno.Fallback()),
        dl.ApplyDefaultSchedule(dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()),
    ]
