"""Front doors: PyTorch (``torch.export``) and ONNX models into Relax, and model-name resolution
for the command line.

* :func:`from_torch` -- a ``torch.nn.Module`` and example inputs, through ``torch.export`` and TVM's
  ``from_exported_program`` (parameters become constants);
* :func:`from_onnx` -- a path or ``onnx.ModelProto`` through TVM's ONNX frontend;
* :func:`load_model` -- a built-in example name, a zoo name, a ``.onnx`` file or a ``.pt2`` file
  (``torch.export.save``).

Extras: ``torch`` and ``onnx`` (``pip install 'relax_vk[torch,onnx]'``); a missing one raises
:class:`relax_vk._extras.MissingExtra` naming it. A file that cannot be read or parsed raises
``ValueError`` naming the file.
"""

from __future__ import annotations

import os
from typing import Sequence, Tuple

import tvm

from ._extras import require


class ModelLoadError(ValueError):
    """A model file could not be read, parsed or imported (names the file and why)."""


def from_torch(module, example_inputs: Sequence) -> tvm.IRModule:
    """Relax module of ``module`` (put in eval mode) for ``example_inputs``."""
    torch = require("torch", "torch")
    from tvm.relax.frontend.torch import from_exported_program

    module = module.eval()
    with torch.no_grad():
        exported = torch.export.export(module, tuple(example_inputs))
    return from_exported_program(exported, keep_params_as_input=False, unwrap_unit_return_tuple=True)


def from_onnx(path_or_model) -> tvm.IRModule:
    """Relax module of an ONNX model (a path or an ``onnx.ModelProto``). The prebuilt TOPI kernels
    TVM's ONNX frontend emits for binary ops (``Clip`` as maximum/minimum) are raised back to Relax
    ops (:func:`relax_vk.passes.RaisePrebuiltBinary`), so the layout stage packs through them."""
    onnx = require("onnx", "onnx")
    from tvm.relax.frontend.onnx import from_onnx as _from_onnx

    model = path_or_model
    if isinstance(path_or_model, (str, os.PathLike)):
        try:
            model = onnx.load(str(path_or_model))
            onnx.checker.check_model(model)
        except Exception as err:
            raise ModelLoadError(f"{path_or_model}: not a readable ONNX model: {err}") from None
    from .passes import RaisePrebuiltBinary

    return RaisePrebuiltBinary()(_from_onnx(model, keep_params_in_input=False))


def load_pt2(path: str) -> tvm.IRModule:
    torch = require("torch", "torch")
    from tvm.relax.frontend.torch import from_exported_program

    try:
        exported = torch.export.load(path)
    except Exception as err:
        raise ModelLoadError(f"{path}: not a readable torch.export archive (.pt2): {err}") from None
    return from_exported_program(exported, keep_params_as_input=False, unwrap_unit_return_tuple=True)


def load_model(spec: str) -> Tuple[tvm.IRModule, dict]:
    """``(Relax module, source description)`` for a model name or file (see module docstring)."""
    from .models import EXAMPLES, build_example

    if spec in EXAMPLES:
        return build_example(spec), {"example": spec}
    if spec.endswith(".onnx"):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        return from_onnx(spec), {"onnx": os.path.abspath(spec)}
    if spec.endswith(".pt2"):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        return load_pt2(spec), {"pt2": os.path.abspath(spec)}
    zoo_names = ("resnet18", "mobilenet_v2", "vit_small", "unet_small", "rgb_stem")
    if spec in zoo_names:
        from .zoo import build_zoo_model

        model, example = build_zoo_model(spec)
        return from_torch(model, (example,)), {"zoo": spec}
    raise ValueError(
        f"unknown model {spec!r}; use a built-in example ({', '.join(sorted(EXAMPLES))}), "
        f"a zoo model ({', '.join(zoo_names)}), or a .onnx / .pt2 file"
    )
