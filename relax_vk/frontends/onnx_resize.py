"""ONNX ``Resize`` by ``scales``: run-time dims, and the scales TVM's converter gets wrong.

TVM's converter turns scales into output sizes and then samples at the ratio of the sizes, while
ONNX samples at the scale itself (``x_in = x_out / scale`` for ``asymmetric``, ``(x_out + 0.5) /
scale - 0.5`` for ``half_pixel``; only ``align_corners`` uses the sizes). The two agree only when
``dim * scale`` is an integer: a 13-row input scaled by 0.5 came out 1.79 off onnxruntime, with no
error. And on a run-time dim it multiplies by the float scale (``cast(int64, 2.0 * cast(float32,
H))``): float arithmetic in a shape, which no later stage can compare, fold or write into the
artifact (a super-resolution net, a U-Net or an FPN at run-time sizes failed to build).

Here, for a 4-D input and constant scales: an integer scale of a run-time dim gives the integer
expression ``dim * scale`` (sampling ratio and scale agree for every size); a static dim whose
product is an integer goes to TVM's converter as before; a product that is not an integer, or a
fractional scale of a run-time dim, is refused by name unless the coordinate transformation reads
only the sizes (``align_corners``). ``sizes`` inputs stay with TVM's converter.

``Upsample`` (opsets 7 to 9), which TVM's importer fails on, is the same resize with asymmetric
coordinates (:func:`convert_upsample`), static dims included.
"""

from __future__ import annotations

from ..core.errors import UnsupportedError
from .errors import onnx_node

_MODES = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}


#: the coordinate transformations TVM's resize computes
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn", "tf_crop_and_resize")


def convert_resize(bb, inputs, attrs, op: str = "Resize", static: bool = False):
    """``Resize`` of a 4-D input with run-time spatial dims and constant ``scales`` (module
    docstring); None (TVM's converter) for everything else. ``static``: static dims are resized
    here too (for an ``op`` TVM cannot convert)."""
    from tvm import relax, tirx
    from tvm.ir import GenericConst

    x = inputs[0]
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    shape = getattr(getattr(x, "ty", None), "shape", None)
    coordinates = attrs.get("coordinate_transformation_mode", b"half_pixel")
    coordinates = coordinates.decode() if isinstance(coordinates, bytes) else str(coordinates)
    if coordinates not in COORDINATE_MODES:  # (TVM raised a bare ValueError at build: half_pixel_symmetric, opset 19)
        raise UnsupportedError(f"{onnx_node(attrs, op)}: coordinate_transformation_mode {coordinates!r} is not supported "
                               f"({', '.join(COORDINATE_MODES)} are)")  # fmt: skip
    if isinstance(getattr(x, "ty", None), relax.TensorType) and shape is None:  # (TVM's converter fails on it with a TypeError)
        raise UnsupportedError(f"{onnx_node(attrs, op)}: its input's shape is lost at run-time dims (an op before it adds or "
                               "concatenates tensors whose sizes TVM cannot prove equal for every size in the ranges); if the "
                               "model's sizes must be multiples of some step, declare it: --dim NAME=MIN:MAX:STEP")  # fmt: skip
    if isinstance(sizes, relax.ShapeExpr) and shape is not None and len(shape.values) == 4:
        return _resize_to_sizes(x, list(shape.values), list(sizes.values), inputs, attrs, op)
    if sizes is not None or not isinstance(scales, GenericConst) or shape is None or len(shape.values) != 4:
        return None
    dims = list(shape.values)
    where = onnx_node(attrs, op)
    values = [float(s) for s in scales.value.numpy().reshape(-1)]
    if len(values) != 4 or values[0] != 1.0 or values[1] != 1.0:
        if all(isinstance(d, tirx.IntImm) for d in dims) and not static:
            return None
        raise UnsupportedError(f"{where}: scales {values}: only the two spatial axes of an NCHW input may be scaled")
    coordinates = attrs.get("coordinate_transformation_mode", b"half_pixel").decode()
    by_sizes = coordinates == "align_corners"
    out = []
    for axis, (dim, scale) in enumerate(zip(dims[2:], values[2:]), start=2):
        if isinstance(dim, tirx.IntImm):
            product = int(dim) * scale
            if product != int(product) and not by_sizes:
                raise UnsupportedError(f"{where}: scale {scale} of axis {axis} ({int(dim)}) gives {product:g} rows, not an integer: "
                                       "ONNX samples at the scale and TVM's resize at the ratio of the sizes, which then differ "
                                       "(export the model with sizes, or an input whose dims the scales divide)")  # fmt: skip
            out.append(int(product))
        elif scale == int(scale) and scale >= 1:
            out.append(dim * int(scale))
        else:
            raise UnsupportedError(f"{where}: scale {scale} of the run-time dim {dim}: only integer scales of run-time dims are "
                                   "supported (a fractional one samples differently for sizes it does not divide); export the "
                                   "model with sizes instead")  # fmt: skip
    if all(isinstance(d, tirx.IntImm) for d in dims) and not static:
        return None  # (every product an integer: TVM's converter is right)
    return _resize2d(x, out, inputs, attrs, where)


def _resize_to_sizes(x, dims, sizes, inputs, attrs, op: str):
    """``Resize`` to ``sizes`` that hold run-time dims (``F.interpolate(y, size=x.shape[2:])``: an
    FPN's upsample to its skip's size), or of an input of run-time size; None (TVM's converter) when
    every size is static. The batch and channels must stay as they are. Nearest sampling is checked
    later, at every size of the dims' ranges (:func:`check_nearest_picks`)."""
    from tvm import tirx
    from tvm.sym import Analyzer

    if all(isinstance(v, tirx.IntImm) for v in dims + sizes):
        return None
    where = onnx_node(attrs, op)
    analyzer = Analyzer()
    if len(sizes) != 4 or not all(analyzer.can_prove_equal(a, b) for a, b in zip(sizes[:2], dims[:2])):
        raise UnsupportedError(f"{where}: sizes {list(sizes)} of an input {list(dims)}: only the two spatial axes of an NCHW input may be resized")
    return _resize2d(x, sizes[2:], inputs, attrs, where)


def _resize2d(x, out, inputs, attrs, where: str):
    """``resize2d`` of ``x`` to the spatial sizes ``out`` as the ``Resize`` node's attributes say
    (a region of interest is refused: the resizes here are of run-time dims)."""
    from tvm import relax
    from tvm.ir import GenericConst

    roi = inputs[1] if len(inputs) > 1 else None
    if roi is not None and not (isinstance(roi, GenericConst) and roi.value.numpy().size == 0):
        raise UnsupportedError(f"{where}: a region of interest with run-time dims is not supported")
    mode = attrs.get("mode", b"nearest").decode()
    coordinates = attrs.get("coordinate_transformation_mode", b"half_pixel").decode()
    if mode not in _MODES:
        raise UnsupportedError(f"{where}: mode {mode!r}")
    return relax.op.image.resize2d(
        x, size=relax.ShapeExpr(out), roi=[0.0, 0.0, 0.0, 0.0], layout="NCHW", method=_MODES[mode],
        coordinate_transformation_mode=coordinates,
        rounding_method=attrs.get("nearest_mode", b"round_prefer_floor").decode(),
        cubic_alpha=attrs.get("cubic_coeff_a", -0.75), cubic_exclude=attrs.get("exclude_outside", 0),
        extrapolation_value=attrs.get("extrapolation_value", 0.0),
    )  # fmt: skip


def convert_upsample(bb, inputs, attrs):
    """``Upsample`` (opsets 7 to 9; YOLOv3-era models), which TVM's importer fails on ("object of
    type 'NoneType' has no len()"): ``Resize`` by its constant scales with asymmetric coordinates,
    rounding down for ``nearest`` (what the operator is defined as); None when the scales are not
    constant (TVM's converter)."""
    import numpy as np
    from tvm import relax

    scales = inputs[1] if len(inputs) > 1 else None
    if scales is None and "scales" in attrs:  # (opset 7: an attribute)
        scales = relax.const(np.asarray(attrs["scales"], np.float32))
    mode = attrs.get("mode", b"nearest")
    mode = mode if isinstance(mode, bytes) else str(mode).encode()
    as_resize = {"mode": mode, "coordinate_transformation_mode": b"asymmetric", "nearest_mode": b"floor",
                 "tvm_custom": attrs.get("tvm_custom", {})}  # fmt: skip
    return convert_resize(bb, [inputs[0], None, scales], as_resize, op="Upsample", static=True)

