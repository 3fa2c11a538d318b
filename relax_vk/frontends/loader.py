"""Model-name resolution for the command line and tools: a built-in example, a zoo name, a
``.onnx`` file or a ``.pt2`` file."""

from __future__ import annotations

import os
from typing import Tuple

import tvm

from .errors import ModelLoadError


def load_model(spec: str) -> Tuple[tvm.IRModule, dict]:
    """``(Relax module, source description)`` for a model name or file; the description (e.g.
    ``{"zoo": "resnet18"}``) lets a runtime rebuild a CPU reference for it."""
    from ..models import EXAMPLES, build_example
    from ..zoo import ZOO

    if spec in EXAMPLES:
        return build_example(spec), {"example": spec}
    if spec.endswith(".onnx"):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        from .onnx import from_onnx

        return from_onnx(spec), {"onnx": os.path.abspath(spec)}
    if spec.endswith(".pt2"):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        from .torch import load_pt2

        return load_pt2(spec), {"pt2": os.path.abspath(spec)}
    if spec in ZOO:
        from ..zoo import build_zoo_model
        from .torch import from_torch

        model, example = build_zoo_model(spec)
        return from_torch(model, (example,)), {"zoo": spec}
    raise ValueError(
        f"unknown model {spec!r}; use a built-in example ({', '.join(sorted(EXAMPLES))}), "
        f"a zoo model ({', '.join(ZOO)}), or a .onnx / .pt2 file"
    )
