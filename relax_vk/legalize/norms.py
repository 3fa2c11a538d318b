"""``relax.nn.group_norm`` and ``relax.nn.instance_norm`` with the variance in two passes.

TOPI's ``group_norm`` and ``instance_norm`` take the variance in one pass, ``E[x^2] - E[x]^2``
from one tuple reduction of ``x`` and ``x * x``. In float32 that cancels: at a mean of 1000 and a
standard deviation of 0.5, ``E[x^2]`` is 1e6 and its rounding (0.06) is a quarter of the variance,
so the normalized output is off by 0.4 on every backend, TVM's own llvm included. TOPI's
``layer_norm`` already takes the mean first and then the mean of squared deviations; these
legalizers do the same for the other two norms (PyTorch's and onnxruntime's formula):

* ``*_sum``: the sum over each group (or instance), accumulated in float32 for 16-bit inputs;
* ``*_var_sum``: the sum of ``(x - mean)^2`` over the same elements;
* the result ``(x - mean) * rsqrt(var + epsilon) * gamma + beta``, ``gamma`` / ``beta`` by channel
  (left out where the op's ``scale`` / ``center`` say so).

The element count may be a run-time size (``H * W`` of a run-time-dims model). A channel count
that is not a compile-time integer, which a group split needs, goes to TVM's legalizer.
"""

from __future__ import annotations

from typing import Callable, Sequence

import tvm
from tvm import relax, te, tirx
from tvm.sym import Analyzer

_SIXTEEN_BIT = ("float16", "bfloat16")


def _count(x: te.Tensor, axes: Sequence[int], acc: str):
    count = tirx.const(1, "int64")
    for a in axes:
        count = count * tirx.Cast("int64", x.shape[a])
    return tirx.Cast(acc, Analyzer().simplify(count))


def _two_pass(x: te.Tensor, gamma, beta, axes: Sequence[int], channel: Callable, epsilon: float, name: str) -> te.Tensor:
    """``x`` normalized over ``axes`` for each index of the other axes (module docstring);
    ``channel(idx)`` is the index of ``gamma`` / ``beta`` (None: left out) for an element."""
    ndim = len(x.shape)
    acc = "float32" if str(x.dtype) in _SIXTEEN_BIT else str(x.dtype)
    count = _count(x, axes, acc)
    stats_shape = [1 if i in axes else x.shape[i] for i in range(ndim)]

    def element(idx, tag):
        rs = [te.reduce_axis((0, x.shape[a]), name=f"{tag}{a}") for a in axes]
        full = list(idx)
        for a, r in zip(axes, rs):
            full[a] = r
        return x[tuple(full)].astype(acc), rs

    def total(*idx):
        v, rs = element(idx, "k")
        return te.sum(v, axis=rs)

    sums = te.compute(stats_shape, total, name=f"{name}_sum")
    mean = te.compute(stats_shape, lambda *idx: sums[idx] / count, name=f"{name}_mean")

    def deviations(*idx):
        v, rs = element(idx, "j")
        return te.sum((v - mean[idx]) * (v - mean[idx]), axis=rs)

    var_sums = te.compute(stats_shape, deviations, name=f"{name}_var_sum")

    def value(*idx):
        s = tuple(0 if i in axes else idx[i] for i in range(ndim))
        y = (x[idx].astype(acc) - mean[s]) * tirx.rsqrt(var_sums[s] / count + tirx.const(float(epsilon), acc))
        if gamma is not None:
            y = y * gamma[channel(idx)].astype(acc)
        if beta is not None:
            y = y + beta[channel(idx)].astype(acc)
        return y.astype(x.dtype)

    return te.compute(x.shape, value, name=name)


def group_norm_compute(
    x: te.Tensor, gamma, beta, num_groups: int, channel_axis: int, axes: Sequence[int], epsilon: float
) -> te.Tensor:
    """GroupNorm of ``x``: ``num_groups`` groups of the channels along ``channel_axis``, each
    normalized over its channels and ``axes``; ``gamma``/``beta`` (or None) by channel. As TOPI
    does, the channel axis is split into ``(groups, channels a group)`` around the norm (the splits
    inline into the kernel)."""
    ndim = len(x.shape)
    ca = channel_axis % ndim
    per_group = int(x.shape[ca]) // num_groups
    grouped_shape = [*x.shape[:ca], num_groups, per_group, *x.shape[ca + 1 :]]

    def grouped(*idx):
        return x[(*idx[:ca], idx[ca] * per_group + idx[ca + 1], *idx[ca + 2 :])]

    xg = te.compute(grouped_shape, grouped, name="group_norm_split")
    # an axis past the channel axis moves one place on in the grouped shape
    reduced = sorted({(a % ndim) + (1 if a % ndim > ca else 0) for a in axes} - {ca} | {ca + 1})
    y = _two_pass(xg, gamma, beta, reduced, lambda idx: idx[ca] * per_group + idx[ca + 1], epsilon, "group_norm")
    return te.compute(x.shape, lambda *idx: y[(*idx[:ca], idx[ca] // per_group, idx[ca] % per_group, *idx[ca + 1 :])],
                      name="group_norm_merge")  # fmt: skip


def instance_norm_compute(x: te.Tensor, gamma, beta, channel_axis: int, axes: Sequence[int], epsilon: float) -> te.Tensor:
    """InstanceNorm of ``x``: normalized over ``axes`` for each index of the others;
    ``gamma``/``beta`` (or None) by the channel along ``channel_axis``."""
    ndim = len(x.shape)
    ca = channel_axis % ndim
    return _two_pass(x, gamma, beta, sorted({int(a) % ndim for a in axes}), lambda idx: idx[ca], epsilon, "instance_norm")


def _static_channels(call: relax.Call) -> bool:
    ty = call.args[0].ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None or ty.ndim <= 0:
        return False
    channels = ty.shape.values[int(call.attrs.channel_axis) % ty.ndim]
    return isinstance(channels, tirx.IntImm)


def _affine(call: relax.Call) -> tuple:
    """The call's tensor arguments and the compute's gamma/beta flags (the op's scale/center)."""
    return call.args[0], call.args[1], call.args[2], bool(call.attrs.scale), bool(call.attrs.center)


def legalize_group_norm(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """:func:`group_norm_compute` for ``call``; TVM's legalizer for a run-time channel count."""
    if not _static_channels(call):
        return tvm.ir.Op.get("relax.nn.group_norm").get_attr("FLegalize")(bb, call)
    x, gamma, beta, scale, center = _affine(call)
    attrs = call.attrs

    def compute(x, gamma, beta):
        return group_norm_compute(x, gamma if scale else None, beta if center else None, int(attrs.num_groups),
                                  int(attrs.channel_axis), [int(a) for a in attrs.axes], float(attrs.epsilon))  # fmt: skip

    return bb.call_te(compute, x, gamma, beta, primfunc_name_hint="group_norm")


def legalize_instance_norm(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """:func:`instance_norm_compute` for ``call``."""
    x, gamma, beta, scale, center = _affine(call)
    attrs = call.attrs

    def compute(x, gamma, beta):
        return instance_norm_compute(x, gamma if scale else None, beta if center else None, int(attrs.channel_axis),
                                     [int(a) for a in attrs.axes], float(attrs.epsilon))  # fmt: skip

    return bb.call_te(compute, x, gamma, beta, primfunc_name_hint="instance_norm")
