"""The TIR pipeline for texture kernels, in the three-part form ``tirx.build`` expects.

TVM 0.27's adreno TIR pipeline returns one pass, but ``tirx.build`` unpacks
``(pipeline, finalize_host, finalize_device)`` and fails with "cannot unpack non-iterable
ModulePass object"; the generic ``s_tir`` pipeline never runs ``TextureFlatten`` and emits OpenCL
that does pointer arithmetic on images. This pipeline is TVM's adreno lowering (``TextureFlatten``
first, ``InjectTextureAlloc`` after ``LowerOpaqueBlock``) with two relax_vk passes in it --
:class:`~relax_vk.codegen.launch_grid.FoldLaunchGrid` just before ``SplitHostDevice`` (no grid axis
over the workgroup limit), the texel-store repair first among the device finalisation passes and,
for Vulkan kernels and OpenCL kernels of a run-time size,
:class:`~relax_vk.codegen.index_narrowing.NarrowIndices` right after it (int32 indices before
``LowerIntrin``) -- and the ``s_tir`` finalisation passes. It is registered as ``"relax_vk.texture"``::

    tvm.compile(mod, target, relax_pipeline=relax_vk.get_pipeline(target), tir_pipeline="relax_vk.texture")
"""

from __future__ import annotations

from typing import List

import tvm
from tvm import s_tir, tirx
from tvm.s_tir import pipeline as s_tir_pipeline
from tvm.tirx import compilation_pipeline

from . import intrinsics  # noqa: F401  (OpenCL lowering of the math intrinsics TVM leaves to C names)
from ..schedules.verify import COMPACTING
from .bool_vectors import LowerBoolVectorCasts
from .exact_floats import ExactFloatConstants
from .float_bindings import InlineFloatBindings
from .index_narrowing import Int64DivisionsAsInt32, Int64ExtremesAsInt32, NameNarrowedSubexpressions, NarrowIndices
from .size_ratios import FoldSizeRatios
from .launch_grid import FoldLaunchGrid
from .texture_origins import PlaceTextures
from .texture_stores import RepairTextureStores

NAME = "relax_vk.texture"


def _finalize_device_passes():
    """TVM's device finalisation, preceded by the repair of scalarised texture stores
    (:mod:`relax_vk.codegen.texture_stores`), for Vulkan kernels and OpenCL kernels of a run-time
    size the narrowing of their int64 indices to int32 before ``LowerIntrin`` lowers their
    divisions, their repeated subexpressions named again after TVM's ``StmtSimplify`` wrote them
    out, and for Vulkan kernels the divisions of int64 data as int32's
    (:mod:`relax_vk.codegen.index_narrowing`), and for OpenCL kernels float constants written
    exactly (:mod:`relax_vk.codegen.exact_floats`)."""
    # (TVM's finalize_device_passes, LowerWarpMemory, StmtSimplify and LowerIntrin, with narrowed
    # kernels' repeated subexpressions named again before LowerIntrin expands them)
    return tvm.transform.Sequential([RepairTextureStores(), Int64ExtremesAsInt32(), NarrowIndices(), ExactFloatConstants(), tirx.transform.LowerWarpMemory(),
                                     tirx.transform.StmtSimplify(), NameNarrowedSubexpressions(), Int64DivisionsAsInt32(), tirx.transform.LowerIntrin()])  # fmt: skip


def lowering_passes(config) -> List[tvm.transform.Pass]:
    """The lowering passes: those of TVM 0.27's adreno pipeline
    (``tvm/s_tir/backend/adreno/pipeline.py``), in its order and with its configuration switches,
    plus :class:`FoldSizeRatios` first, :class:`LowerBoolVectorCasts` right after ``VectorizeLoop``,
    :class:`InlineFloatBindings` right after ``CommonSubexprElim``, and :class:`PlaceTextures` (on the
    functions the exporter marks) and :class:`FoldLaunchGrid` right before ``SplitHostDevice``."""
    passes = [
        FoldSizeRatios(),
        s_tir.backend.adreno.transform.TextureFlatten(),
        *[make() for make in COMPACTING],  # (what the scheduler's verifier also runs: schedules.verify)
        s_tir.transform.LowerAutoCopy(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.InjectPermutedLayout(),
        s_tir.transform.AnnotateIrregularLoop(),
        s_tir.transform.InjectSoftwarePipeline(),
        s_tir.transform.TransformMmaBufferLayout(),
        s_tir.transform.LowerOpaqueBlock(),
        s_tir.backend.adreno.transform.InjectTextureAlloc(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        s_tir.transform.LoopPartition(),
        tirx.transform.VectorizeLoop(not bool(config.get("tirx.disable_vectorize", False))),
        LowerBoolVectorCasts(),
        s_tir.transform.InjectVirtualThread(),
        s_tir.transform.InjectDoubleBuffer(),
    ]
    if not bool(config.get("tirx.disable_storage_rewrite", False)):
        passes.append(tirx.transform.StorageRewrite())
    passes += [
        s_tir.transform.HoistIfThenElse(),
        tirx.transform.UnrollLoop(),
        s_tir.transform.RenormalizeSplitPattern(),
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveNoOp(),
        s_tir.transform.RewriteUnsafeSelect(),
    ]
    if not bool(config.get("tirx.disable_cse_tir", False)):
        passes += [tirx.transform.CommonSubexprElim(), InlineFloatBindings()]
    passes += [
        tirx.transform.FP8ComputeLegalize(),
        s_tir.transform.VerifyVTCMLimit(),
        s_tir.transform.LowerVtcmAlloc(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        s_tir.transform.ThreadSync("shared"),
        s_tir.transform.ThreadSync("shared.dyn"),
        s_tir.transform.ThreadSync("warp"),
        s_tir.transform.InferFragment(),
        s_tir.transform.LowerThreadAllreduce(),
        s_tir.transform.MergeSharedMemoryAllocations(),
        PlaceTextures(),
        FoldLaunchGrid(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
        tirx.transform.FP8StorageLegalize(),
        tirx.transform.BF16StorageLegalize(),
    ]
    return passes


@tvm.transform.module_pass(opt_level=0, name="relax_vk.texture_lowering")
def _lowering(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    return tvm.transform.Sequential(lowering_passes(tvm.transform.PassContext.current().config))(mod)


def texture_tir_pipeline(**_kwargs):
    """``(pipeline, finalize_host, finalize_device)`` for texture kernels."""
    return (
        _lowering,
        s_tir_pipeline.finalize_host_passes,
        _finalize_device_passes,
    )


compilation_pipeline.register_tir_pipeline(NAME, texture_tir_pipeline)
