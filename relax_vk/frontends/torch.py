"""PyTorch front door: ``torch.export``, PyTorch's core-ATen decompositions, then TVM's
``from_exported_program`` with relax_vk's converters for what TVM gets wrong or decomposes badly.

Converters relax_vk adds (each found by the differential fuzzer):

* ``replication_pad2d`` / ``reflection_pad2d`` stay pads (``relax.op.nn.pad`` in ``replicate`` /
  ``reflect`` mode) instead of PyTorch's decomposition into ``arange``/``clamp``/``index`` gathers
  with int64 index tensors: the pad stays one packed op the layout stage keeps in textures;
* ``upsample_nearest2d``: PyTorch's nearest mode is ``src = floor(dst * in / out)``
  (``asymmetric`` + ``floor``); TVM maps it to ``half_pixel`` + ``round``, which picks other rows
  whenever the ratio is not an integer (wrong numbers, no error);
* ``adaptive_max_pool2d`` (TVM has no converter): a max pool when the input divides evenly, TOPI's
  adaptive pool otherwise. Its indices output is not computed (zeros), as TVM does for
  ``max_pool2d_with_indices``.
"""

from __future__ import annotations

from typing import Sequence

import tvm
from tvm import relax

from ..core.extras import require
from .errors import ModelLoadError

#: ATen ops relax_vk converts itself, so PyTorch must not decompose them first
KEEP = ("aten.replication_pad2d.default", "aten.reflection_pad2d.default", "aten.upsample_nearest2d.default", "aten.upsample_nearest2d.vec")


def _pad_converter(mode: str):
    def convert(node, importer) -> relax.Var:
        x = importer.env[node.args[0]]
        left, right, top, bottom = (int(p) for p in node.args[1])
        width = [0] * (2 * (x.ty.ndim - 2)) + [top, bottom, left, right]
        return importer.block_builder.emit(relax.op.nn.pad(x, width, mode, 0.0))

    return convert


def _upsample_nearest(node, importer) -> relax.Var:
    x = importer.env[node.args[0]]
    size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size", node.kwargs.get("size"))
    if not size:
        scales = node.args[2] if len(node.args) > 2 else node.kwargs.get("scale_factors")
        if isinstance(scales, (int, float)):
            scales = [scales, scales]
        shape = [int(d) for d in x.ty.shape.values]
        size = [int(shape[2] * float(scales[0])), int(shape[3] * float(scales[1]))]
    return importer.block_builder.emit(
        relax.op.image.resize2d(
            x, [int(s) for s in size], layout="NCHW", method="nearest_neighbor",
            coordinate_transformation_mode="asymmetric", rounding_method="floor",
        )
    )  # fmt: skip


def _adaptive_max_pool(node, importer) -> relax.Var:
    from tvm import topi

    x = importer.env[node.args[0]]
    out_h, out_w = (int(s) for s in node.args[1])
    _, _, h, w = (int(d) for d in x.ty.shape.values)
    bb = importer.block_builder
    if h % out_h == 0 and w % out_w == 0:
        kernel = (h // out_h, w // out_w)
        values = bb.emit(relax.op.nn.max_pool2d(x, kernel, kernel, layout="NCHW"))
    else:
        values = bb.emit_te(topi.nn.adaptive_pool, x, (out_h, out_w), "max", "NCHW")
    indices = bb.emit(relax.op.zeros(values.ty.shape, "int64"))
    return bb.emit(relax.Tuple([values, indices]))


CONVERTERS = {
    "replication_pad2d.default": _pad_converter("replicate"),
    "reflection_pad2d.default": _pad_converter("reflect"),
    "upsample_nearest2d.vec": _upsample_nearest,
    "upsample_nearest2d.default": _upsample_nearest,
    "adaptive_max_pool2d.default": _adaptive_max_pool,
}


def _decomposed(torch, exported):
    """``exported`` lowered to core ATen, except the ops relax_vk converts itself."""
    table = torch.export.default_decompositions()
    for key in list(table.keys()):
        if str(key) in KEEP:
            del table[key]
    return exported.run_decompositions(table)


def from_exported(exported) -> tvm.IRModule:
    """Relax module of a ``torch.export.ExportedProgram`` (see the module docstring)."""
    torch = require("torch", "torch")
    from tvm.relax.frontend.torch import from_exported_program

    return from_exported_program(
        _decomposed(torch, exported), keep_params_as_input=False, unwrap_unit_return_tuple=True,
        custom_convert_map=CONVERTERS, run_ep_decomposition=False,
    )  # fmt: skip


def from_torch(module, example_inputs: Sequence) -> tvm.IRModule:
    """Relax module of ``module`` (put in eval mode) for ``example_inputs``; parameters become
    constants."""
    torch = require("torch", "torch")

    module = module.eval()
    with torch.no_grad():
        exported = torch.export.export(module, tuple(example_inputs))
    return from_exported(exported)


def load_pt2(path: str) -> tvm.IRModule:
    """Relax module of a ``torch.export.save`` archive."""
    torch = require("torch", "torch")

    try:
        exported = torch.export.load(path)
    except Exception as err:
        raise ModelLoadError(f"{path}: not a readable torch.export archive (.pt2): {err}") from None
    return from_exported(exported)
