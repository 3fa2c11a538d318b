"""ChooseConvAlgorithm: Winograd F(2,3) / F(4,3) or the direct schedule, per 3x3 stride-1 conv.

Requires: a packed module (after the layout stage; NCHW4c / OIHW4o conv2d calls) and the target it
is scoped for; runs after :func:`~relax_vk.passes.scope.choose_memory_kind.ChooseMemoryKind`, whose
decision says which memory kind the tuning database is asked about.

Guarantees: every conv2d the rule picks (:func:`decide`) is replaced by a ``call_tir`` of the
Winograd kernel (:func:`relax_vk.legalize.winograd.winograd_conv2d_compute`, ``relax_vk.source_op``
= ``relax_vk.winograd_conv2d``: data, output and transformed weight take the scopes a conv's
take), its weight by the transformed weight ``U = G g G^T``: a constant computed here in numpy
(float64, stored in the weight's dtype) when the weight is a constant, else a weight-transform
kernel (tuning programs take weights as inputs). Other calls are unchanged.

Eligible convs: NCHW4c float32, 3x3, stride 1, dilation 1, one group (grouped, depthwise,
strided and dilated convs stay direct). The rule per eligible conv (``ScopeOptions(winograd=...)``):

* ``"off"``: direct; ``"f23"`` / ``"f43"``: F(2,3) / F(4,3) for every eligible conv (forced, for
  measurement and tests);
* ``"auto"`` (the default): the tuning database's record for the conv's workload on the target's
  device, API and memory kind, when it has one (``relax-vk tune`` measures the Winograd
  configurations as candidates of the conv workload; a record whose configuration has a
  ``winograd`` tile size picks Winograd); without a record, :func:`default_tile` (direct: see
  there why).
"""

from __future__ import annotations

from typing import Optional

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core import target as _target
from ...core.ir_utils import rewrite_functions
from ...core.options import ScopeOptions
from ...legalize import winograd as wino
from ...schedules.conv2d import Conv2dWorkload

_CONV = "relax.nn.conv2d"


def _static(ty) -> Optional[tuple]:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    try:
        return tuple(int(d) for d in ty.shape.values)
    except (TypeError, ValueError, AttributeError):
        return None


def _padding(attrs) -> tuple:
    pad = [int(p) for p in attrs.padding]
    return tuple(pad * 4)[:4] if len(pad) == 1 else (pad[0], pad[1], pad[0], pad[1]) if len(pad) == 2 else tuple(pad)


def eligible(call: relax.Call) -> Optional[Conv2dWorkload]:
    """The workload of a conv call Winograd F(m,3) computes, or None (module docstring)."""
    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == _CONV):
        return None
    a = call.attrs
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCHW4c", "OIHW4o", "NCHW4c"):
        return None
    if int(a.groups) != 1 or any(int(s) != 1 for s in a.strides) or any(int(d) != 1 for d in a.dilation):
        return None
    data, weight = (_static(arg.ty) for arg in call.args[:2])
    out = _static(call.ty)
    dtypes = {str(arg.ty.dtype) for arg in call.args[:2]} | {str(call.ty.dtype)}
    if data is None or weight is None or out is None or dtypes != {"float32"} or len(weight) != 5 or weight[2:4] != (3, 3):
        return None
    if weight[1] != data[1] * 4:
        return None
    n, oc4, oh, ow, _ = out
    return Conv2dWorkload(n, oc4, oh, ow, weight[1], 3, 3, False)


def default_tile(w: Conv2dWorkload) -> Optional[int]:
    """The untuned choice: None (direct) for every conv. The fused Winograd kernel trades 2.25x
    (F(2,3)) or 4x (F(4,3)) fewer multiply-adds for more weight texels fetched per output (each
    weight texel feeds one tile's 4 lanes, where the direct schedule's feeds ``4 * px`` pixels)
    and for more registers per thread; which side wins depends on the GPU, and the CPU devices
    measured here say nothing about GPUs (docs/schedules.md has the numbers). A measured record
    (``relax-vk tune``) picks Winograd per workload; ``ScopeOptions(winograd="f23")`` forces it."""
    return None


#: Under ``ScopeOptions(precision="fp16")`` a record's F(4,3) becomes F(2,3): its transformed weights
#: and tiles in half texels gave 4.4e-3 of the output's magnitude on a 16-channel conv (the fp16
#: bound is 1e-2; F(2,3) 5.5e-4, direct 4.2e-4), and the records are measured in float32.
#: ``winograd="f43"`` still forces it.
FP16_TILE = 2


def decide(w: Conv2dWorkload, options: ScopeOptions, device: Optional[str], api: str, memory: str) -> tuple:
    """``(tile size or None, source)`` for an eligible conv: source ``"forced"``, ``"off"``,
    ``"tuned"`` (a database record, Winograd or direct) or ``"default"``."""
    if options.winograd == "off":
        return None, "off"
    if options.winograd in ("f23", "f43"):
        return (2 if options.winograd == "f23" else 4), "forced"
    from ...schedules.tuning import lookup

    config = lookup(device, api, memory, w.key()) if device else None
    if config is not None:
        m = int(config["winograd"]) if "winograd" in config else None
        if m == 4 and options.precision == "fp16":
            m = FP16_TILE  # half texels: F(4,3) loses too much (see FP16_TILE)
        return m, "tuned"
    return default_tile(w), "default"


@relax.expr_functor.mutator
class _Rewriter(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, options: ScopeOptions, device: Optional[str], api: str, memory: str):
        super().__init__(mod)
        self.options, self.device, self.api, self.memory = options, device, api, memory
        self.chosen = 0

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        w = eligible(call)
        if w is None:
            return call
        m, _ = decide(w, self.options, self.device, self.api, self.memory)
        if m is None:
            return call
        data, weight = call.args[:2]
        if isinstance(weight, GenericConst):
            u = relax.const(wino.transform_weight(weight.value.numpy(), m))
        else:
            transform = self.builder_.call_te(
                wino.winograd_weight_compute, weight, m, primfunc_name_hint="winograd_weight", primfunc_attrs=wino.weight_attrs()
            )
            u = self.builder_.emit(transform)
        self.chosen += 1
        return self.builder_.call_te(
            wino.winograd_conv2d_compute, data, u, list(_padding(call.attrs)), m, str(call.ty.dtype),
            primfunc_name_hint="winograd_conv2d", primfunc_attrs=wino.conv_attrs(),
        )  # fmt: skip


def memory_kind(options: ScopeOptions) -> str:
    """The memory kind the conv records of a plan with ``options`` are keyed by."""
    if not options.textures:
        return "buffer"
    return "texture" if options.weights_in_texture else "texture+wbuf"


def ChooseConvAlgorithm(target: "tvm.target.Target | str | None" = None, options: Optional[ScopeOptions] = None) -> tvm.transform.Pass:
    """The pass (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.ChooseConvAlgorithm")
    def _choose(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        from .choose_memory_kind import effective_options

        opts = effective_options(mod, options)
        if opts.winograd == "off":
            return mod
        tgt = _target.resolve(target)
        device, api = _target.target_device(tgt), _target.target_api(tgt)
        rewriter = _Rewriter(mod, opts, device, api, memory_kind(opts))
        rewritten = rewrite_functions(rewriter, mod)
        return relax.transform.DeadCodeElimination()(rewritten) if rewriter.chosen else mod

    return _choose
