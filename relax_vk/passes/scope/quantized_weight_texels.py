"""QuantizedWeightTexels: int8 conv weights held in textures as signed normalized bytes.

Requires: a packed module (after the layout stage) and the target it is scoped for; runs after
:func:`~relax_vk.passes.scope.choose_memory_kind.ChooseMemoryKind` (whose options say whether conv
weights go in textures) and :func:`~relax_vk.passes.scope.choose_conv_algorithm.ChooseConvAlgorithm`
(a Winograd transform would make the weight a float of no byte form, and it takes float32 convs
only). A quantized conv is what :mod:`relax_vk.passes.layout.quantized_weights` wrote:
``multiply(conv2d(x, W), S)``, ``W`` an int8 OIHW4o constant (``q - zero point``), ``S`` the
float32 per-channel scales.

Guarantees: where ``W``'s values lie in ``[-127, 127]`` (onnxruntime's and PyTorch's symmetric int8
weights do), the plan puts conv weights in textures (``ScopeOptions(textures=True,
weights_in_texture=True)``), the target's device can hold such texels (its tuning database may say not:
:func:`relax_vk.schedules.tuning.snorm8_images`) and ``W`` fits the
target's texture limits, the call becomes ``multiply(conv2d(x, W / 127), S * 127)``, ``W / 127`` a
float32 constant: ``conv(x, W) * S == conv(x, W / 127) * (127 * S)`` up to float32 rounding. Exported, a texture constant whose values are
all ``k / 127`` is stored in ``snorm8`` texels (:func:`relax_vk.storage.lifetimes.snorm8_values`:
OpenCL ``CL_SNORM_INT8`` images, Vulkan ``rgba8snorm`` textures, whose reads return ``byte / 127``
in the texture unit; on an OpenCL device without them, ``CL_SIGNED_INT8`` images whose reads the
runtime rewrites as integer reads times ``1 / 127``: ``native/src/integer_weight_reads.cpp``), one
byte a channel as the int8 weight was. The conv is then a float conv
whose weight is in a texture: the kernel, schedule and tuning records of a float model's conv,
with no integer conversions in its loop and a quarter of float32's weight bytes on the device.

Other convs are unchanged, ``W`` in int8 and read from a buffer (memory kind ``texture+wbuf``): a
conv whose scales are all 1 (``ConvInteger`` of the dynamic form, as
:mod:`relax_vk.frontends.onnx_quant` writes it: its sums of integers are exact in float32 with
integer weights, and would not be with ``W / 127``), a weight holding -128 (``byte / 127`` cannot
give it), a plan with weights in buffers, a device without snorm8 images, or a weight too large for
a texture.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core import target as _target
from ...core.ir_utils import rewrite_functions
from ...core.options import ScopeOptions
from ...core.scope import TEXTURE_SCOPES
from ...storage.lifetimes import SNORM8_MAX


def snorm8_weight(weight: np.ndarray) -> Optional[np.ndarray]:
    """``weight / 127`` as float32 for an int8 array whose values lie in [-127, 127], else None."""
    if weight.dtype != np.int8 or (weight.size and int(weight.min()) < -SNORM8_MAX):
        return None
    return weight.astype(np.float32) / np.float32(SNORM8_MAX)


def _fits_texture(shape, limits) -> bool:
    return any(scope.fits(shape, "float32", limits) for scope in TEXTURE_SCOPES)


@relax.expr_functor.mutator
class _Rewriter(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, limits):
        super().__init__(mod)
        self.limits = limits
        self.rewritten = 0

    def _quantized_conv(self, expr) -> Optional[relax.Call]:
        """The conv2d ``expr`` is bound to, when it reads an int8 constant weight of snorm8 range
        that fits a texture."""
        bound = self.lookup_binding(expr) if isinstance(expr, relax.Var) else None
        if not (isinstance(bound, relax.Call) and getattr(bound.op, "name", "") == "relax.nn.conv2d"):
            return None
        weight = bound.args[1]
        if not isinstance(weight, GenericConst) or str(bound.attrs.kernel_layout) != "OIHW4o":
            return None
        if snorm8_weight(weight.value.numpy()) is None or not _fits_texture(tuple(weight.value.shape), self.limits):
            return None
        return bound

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if getattr(call.op, "name", "") != "relax.multiply" or not isinstance(call.args[1], GenericConst):
            return call
        conv = self._quantized_conv(call.args[0])
        scales = call.args[1].value.numpy()
        # (unit scales: ConvInteger's integer sums, exact in float32 only with integer weights)
        if conv is None or scales.dtype != np.float32 or bool(np.all(scales == 1.0)):
            return call
        a = conv.attrs
        weight = relax.const(snorm8_weight(conv.args[1].value.numpy()))
        new_conv = self.builder_.emit(relax.op.nn.conv2d(
            conv.args[0], weight, a.strides, a.padding, a.dilation, a.groups, a.data_layout, a.kernel_layout, a.out_layout, a.out_dtype
        ))  # fmt: skip
        self.rewritten += 1
        return relax.op.multiply(new_conv, relax.const(scales * np.float32(SNORM8_MAX)))


def QuantizedWeightTexels(target: "tvm.target.Target | str | None" = None, options: Optional[ScopeOptions] = None) -> tvm.transform.Pass:
    """The pass (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.QuantizedWeightTexels")
    def _texels(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        from .choose_memory_kind import effective_options

        from ...schedules.tuning import snorm8_images

        opts = effective_options(mod, options)
        tgt = _target.resolve(target)
        if not (opts.textures and opts.weights_in_texture and snorm8_images(_target.target_device(tgt), _target.target_api(tgt))):
            return mod
        rewriter = _Rewriter(mod, _target.texture_limits(tgt))
        rewritten = rewrite_functions(rewriter, mod)
        return relax.transform.DeadCodeElimination()(rewritten) if rewriter.rewritten else mod

    return _texels
