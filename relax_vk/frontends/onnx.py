"""ONNX front door: TVM's ONNX frontend, then :class:`RaisePrebuiltBinary` (the import fix-up)."""

from __future__ import annotations

import os

import tvm

from ..core.extras import require
from .errors import ModelLoadError
from .raise_prebuilt_binary import RaisePrebuiltBinary


def from_onnx(path_or_model) -> tvm.IRModule:
    """Relax module of an ONNX model (a path or an ``onnx.ModelProto``). The prebuilt TOPI kernels
    TVM's ONNX frontend emits for binary ops (``Clip`` as maximum/minimum) are raised back to Relax
    ops (:class:`RaisePrebuiltBinary`), so the layout stage packs through them."""
    onnx = require("onnx", "onnx")
    from tvm.relax.frontend.onnx import from_onnx as _from_onnx

    model = path_or_model
    if isinstance(path_or_model, (str, os.PathLike)):
        try:
            model = onnx.load(str(path_or_model))
            onnx.checker.check_model(model)
        except Exception as err:
            raise ModelLoadError(f"{path_or_model}: not a readable ONNX model: {err}") from None
    return RaisePrebuiltBinary()(_from_onnx(model, keep_params_in_input=False))
