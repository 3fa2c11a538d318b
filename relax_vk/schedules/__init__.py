"""GPU schedules for the lowered kernels, one module per op family, and the order they are tried in.

:data:`RULES` is that order; :func:`schedule_passes` applies it with
:class:`~relax_vk.schedules.apply.ScheduleKernels`, which verifies every rule's result
(:mod:`.verify`) and falls back to the next rule, then to the safe schedule (:mod:`.fallback`):

1. ``conv2d`` -- relax_vk's NCHW4c conv schedule (:mod:`.conv2d`: register-blocked, broadcast FMAs,
   padding and epilogues fused; 1x1 convs also as packed GEMMs over flattened pixels,
   :mod:`.conv1x1`), configured from the tuning database (:mod:`.tuning`) where the target's
   device has a record, else by its untuned default;
2. ``token_matmul`` -- relax_vk's batched matmul of token tensors (:mod:`.matmul`: register
   tiles of rows x texels, whole-texel operand loads, epilogues fused);
3. ``channel_reduce`` -- channel statistics of token tensors, one workgroup per row
   (:mod:`.channel_reduce`: texels split over the threads, combined across them);
   ``row_norm`` -- LayerNorm and softmax of token tensors as one kernel, rows side by side in a
   workgroup (:mod:`.row_norm`: rows staged in workgroup memory, per-thread partial statistics);
   ``linear`` -- linear layers over run-time rows (a decoder's ``[S, K] @ [K, N]``, :mod:`.linear`:
   outputs side by side, each sum split over threads, partials combined in workgroup memory);
   ``run_time_conv`` -- convs (and windowed pools) of a run-time spatial size in NCHW buffers
   (:mod:`.run_time_conv`: a register tile of output channels x columns a thread, padding and
   epilogues fused);
4. ``pool`` -- relax_vk's NCHW4c pool schedule (:mod:`.pooling`: a thread per output texel, or a
   workgroup per output texel for global pools; TVM's adreno pool rule accumulates four texel
   lanes into one element: wrong numbers on pocl);
5. ``adreno.layout_transform`` -- TVM's dlight adreno rule (its ``adreno.conv2d`` rule is not used:
   for grouped convs whose groups split a texel, the only convs it got, it kept an 832-float
   window cache a thread, and the safe schedule ran those convs 1.7-22x faster on an H200);
6. ``adreno.fallback`` -- TVM's adreno fallback for other texture-writing kernels (vectorised texel
   stores);
7. ``gpu.reduction``, ``gpu.general_reduction`` -- TVM's generic GPU reduction rules, for plain
   (unwindowed) reductions only, and not for sums of fewer than 16 terms in kernels of run-time
   size (those get a thread an output);
   ``wide_reduction`` -- long reductions of any reducer (max, min) to few outputs, which those
   rules decline: a workgroup an output, the terms split over its threads (:mod:`.wide_reduction`);
8. ``run_time_sums`` -- other dot products in kernels of run-time size (attention scores over a
   run-time length): outputs side by side, each sum split over a warp's lanes (:mod:`.run_time_sums`);
9. ``safe`` -- :func:`~relax_vk.schedules.fallback.schedule_safe`, which fits any kernel (and
   replaces dlight's ``gpu.Fallback``).

Kernels with a trivial (extent-1) reduction skip the upstream rules: :mod:`.analysis` says why.
Hand-scheduled kernels (``tirx.is_scheduled``: :mod:`.recurrence`, :mod:`.decode_attention`,
:mod:`.rotary`) are left as they are; their serial CPU forms are found by :mod:`.cpu_forms`.

TVM 0.27 then scalarises every vectorised texture store during lowering; relax_vk's TIR pipeline
repairs them (:mod:`relax_vk.codegen.texture_stores`).
"""

from __future__ import annotations

from typing import List

import tvm
from tvm.s_tir import dlight as dl

from .analysis import has_trivial_reduction, reductions_are_plain, short_run_time_sum
from .apply import KernelScheduleError, Rule, ScheduleKernels, max_threads, schedule_kernel
from .channel_reduce import channel_reduce_rule
from .linear import linear_rule
from .run_time_conv import run_time_conv_rule
from .run_time_sums import run_time_sums_rule
from .conv2d import conv2d_rule
from .matmul import token_matmul_rule
from .pooling import schedule_pool
from .row_norm import row_norm_rule
from .winograd import winograd_rule
from .wide_reduction import wide_reduction_rule


def _dlight(rule):
    """A dlight rule as a relax_vk rule: the scheduled PrimFunc, or None when the rule declines."""

    def apply(func, target):
        space = rule.apply(func, target, False)
        if isinstance(space, (list, tuple)):
            space = space[0] if space else None
        return space.mod["main"] if space is not None else None

    return apply


def _unless(predicate, rule):
    return lambda func, target: None if predicate(func) else rule(func, target)


def _only_if(predicate, rule):
    return lambda func, target: rule(func, target) if predicate(func) else None


# the upstream rules never see a kernel with a trivial reduction, and the generic reduction rules
# only plain (unwindowed) reductions: both produce wrong numbers otherwise (.analysis); nor short
# sums at a run-time size, where a workgroup an output leaves most threads idle
def _upstream_declines(func) -> bool:
    return has_trivial_reduction(func) or not reductions_are_plain(func) or short_run_time_sum(func)


RULES: List[Rule] = [
    ("conv2d", conv2d_rule),
    ("winograd", winograd_rule),
    ("token_matmul", token_matmul_rule),
    ("channel_reduce", channel_reduce_rule),
    ("row_norm", row_norm_rule),
    ("linear", linear_rule),
    ("run_time_conv", run_time_conv_rule),
    ("pool", lambda func, target: schedule_pool(func, max_threads(target))),
    ("adreno.layout_transform", _unless(has_trivial_reduction, _dlight(dl.adreno.LayoutTransform()))),
    ("adreno.fallback", _unless(has_trivial_reduction, _dlight(dl.adreno.Fallback()))),
    ("gpu.reduction", _unless(_upstream_declines, _dlight(dl.gpu.Reduction()))),
    ("gpu.general_reduction", _unless(_upstream_declines, _dlight(dl.gpu.GeneralReduction()))),
    ("wide_reduction", _unless(has_trivial_reduction, wide_reduction_rule)),
    ("run_time_sums", _unless(has_trivial_reduction, run_time_sums_rule)),
]


def schedule_passes() -> List[tvm.transform.Pass]:
    """The scheduling passes (they need the target entered, as the rules read it)."""
    return [ScheduleKernels(RULES)]


__all__ = ["KernelScheduleError", "RULES", "ScheduleKernels", "schedule_kernel", "schedule_passes"]
