"""The TIR pipeline for texture kernels, in the three-part form ``tirx.build`` expects.

TVM 0.27's adreno TIR pipeline returns one pass, but ``tirx.build`` unpacks
``(pipeline, finalize_host, finalize_device)`` and fails with "cannot unpack non-iterable
ModulePass object"; the generic ``s_tir`` pipeline never runs ``TextureFlatten`` and emits OpenCL
that does pointer arithmetic on images. This pipeline runs ``TextureFlatten`` first and
``InjectTextureAlloc`` after ``LowerOpaqueBlock`` (TVM's adreno lowering) with the ``s_tir``
finalisation passes, and is registered as ``"relax_vk.texture"``::

    tvm.compile(mod, target, relax_pipeline=relax_vk.get_pipeline(target), tir_pipeline="relax_vk.texture")
"""

from __future__ import annotations

import tvm
from tvm.s_tir import pipeline as s_tir_pipeline
from tvm.s_tir.backend.adreno import pipeline as adreno_pipeline
from tvm.tirx import compilation_pipeline

from .texture_stores import RepairTextureStores

NAME = "relax_vk.texture"


def _finalize_device_passes():
    """TVM's device finalisation, preceded by the repair of scalarised texture stores
    (:mod:`relax_vk.codegen.texture_stores`)."""
    return tvm.transform.Sequential([RepairTextureStores(), s_tir_pipeline.finalize_device_passes()])


def texture_tir_pipeline(**_kwargs):
    """``(pipeline, finalize_host, finalize_device)`` for texture kernels."""
    return (
        adreno_pipeline.default_tir_pipeline(),
        s_tir_pipeline.finalize_host_passes,
        _finalize_device_passes,
    )


compilation_pipeline.register_tir_pipeline(NAME, texture_tir_pipeline)
