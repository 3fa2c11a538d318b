"""Built-in example models, each a small NCHW Relax module built with the BlockBuilder.

``rfc-conv2d`` is the RFC's worked example: x (2,64,56,56), w (32,64,3,3), one conv2d. The others
exercise what the scope passes must handle: fusion-friendly chains, pools, residual adds, a
3-channel RGB stem (channel padding), branches with mixed consumers, and a 20-conv network.
Weights are function parameters unless noted, so plans show the packing of weights too.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import numpy as np
import tvm
from tvm import relax


def _tensor(name: str, shape, dtype: str = "float32") -> relax.Var:
    return relax.Var(name, relax.TensorType(shape, dtype))


def _const(shape, seed: int) -> relax.Expr:
    """A seeded constant; conv weights are scaled by 1/sqrt(fan_in) so deep stacks stay O(1)."""
    rng = np.random.default_rng(seed)
    fan_in = int(np.prod(shape[1:])) if len(shape) == 4 and shape[0] > 1 else 1
    return relax.const((rng.standard_normal(shape) / np.sqrt(fan_in) * (1.0 if fan_in > 1 else 0.1)).astype("float32"))


def rfc_conv2d() -> tvm.IRModule:
    bb = relax.BlockBuilder()
    x, w = _tensor("x", (2, 64, 56, 56)), _tensor("w", (32, 64, 3, 3))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.nn.conv2d(x, w, out_dtype="float32"))
        bb.emit_func_output(gv)
    return bb.get()


def conv_relu_pool() -> tvm.IRModule:
    bb = relax.BlockBuilder()
    x, w = _tensor("x", (1, 16, 32, 32)), _tensor("w", (32, 16, 3, 3))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            c = bb.emit(relax.op.nn.conv2d(x, w, padding=(1, 1)))
            r = bb.emit(relax.op.nn.relu(c))
            gv = bb.emit_output(relax.op.nn.max_pool2d(r, (2, 2), (2, 2)))
        bb.emit_func_output(gv)
    return bb.get()


def residual_block() -> tvm.IRModule:
    bb = relax.BlockBuilder()
    x = _tensor("x", (1, 32, 28, 28))
    with bb.function("main", [x]):
        with bb.dataflow():
            c1 = bb.emit(relax.op.nn.conv2d(x, _const((32, 32, 3, 3), 1), padding=(1, 1)))
            b1 = bb.emit(relax.op.add(c1, _const((1, 32, 1, 1), 2)))
            r1 = bb.emit(relax.op.nn.relu(b1))
            c2 = bb.emit(relax.op.nn.conv2d(r1, _const((32, 32, 3, 3), 3), padding=(1, 1)))
            s = bb.emit(relax.op.add(c2, x))
            gv = bb.emit_output(relax.op.nn.relu(s))
        bb.emit_func_output(gv)
    return bb.get()


def rgb_stem() -> tvm.IRModule:
    bb = relax.BlockBuilder()
    x = _tensor("x", (1, 3, 64, 64))
    with bb.function("main", [x]):
        with bb.dataflow():
            c1 = bb.emit(relax.op.nn.conv2d(x, _const((16, 3, 3, 3), 4), strides=(2, 2), padding=(1, 1)))
            r1 = bb.emit(relax.op.clip(c1, 0.0, 6.0))
            c2 = bb.emit(relax.op.nn.conv2d(r1, _const((16, 1, 3, 3), 5), padding=(1, 1), groups=16))
            r2 = bb.emit(relax.op.clip(c2, 0.0, 6.0))
            gv = bb.emit_output(relax.op.nn.conv2d(r2, _const((2, 16, 1, 1), 6)))
        bb.emit_func_output(gv)
    return bb.get()


def conv_chain(num_convs: int = 20, channels: int = 32, size: int = 28, seed: int = 0) -> tvm.IRModule:
    """``num_convs`` 3x3 convs, each followed by bias add and relu, with a residual add every two
    convs: about ``4 * num_convs`` ops. Used by the 20-conv example and the pass benchmark."""
    bb = relax.BlockBuilder()
    x = _tensor("x", (1, channels, size, size))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            skip = x
            for i in range(num_convs):
                c = bb.emit(relax.op.nn.conv2d(h, _const((channels, channels, 3, 3), seed + 2 * i), padding=(1, 1)))
                b = bb.emit(relax.op.add(c, _const((1, channels, 1, 1), seed + 2 * i + 1)))
                if i % 2 == 1:
                    b = bb.emit(relax.op.add(b, skip))
                h = bb.emit(relax.op.nn.relu(b))
                if i % 2 == 1:
                    skip = h
            gv = bb.emit_output(h)
        bb.emit_func_output(gv)
    return bb.get()


def mixed_consumers() -> tvm.IRModule:
    """One conv output read by two convs (texture) and a channel softmax (buffer)."""
    bb = relax.BlockBuilder()
    x = _tensor("x", (1, 16, 20, 20))
    with bb.function("main", [x]):
        with bb.dataflow():
            p = bb.emit(relax.op.nn.conv2d(x, _const((16, 16, 3, 3), 7), padding=(1, 1)))
            a = bb.emit(relax.op.nn.conv2d(p, _const((16, 16, 3, 3), 8), padding=(1, 1)))
            b = bb.emit(relax.op.nn.conv2d(p, _const((16, 16, 1, 1), 9)))
            s = bb.emit(relax.op.nn.softmax(p, axis=1))
            ab = bb.emit(relax.op.add(a, b))
            gv = bb.emit_output(relax.op.add(ab, s))
        bb.emit_func_output(gv)
    return bb.get()


EXAMPLES: Dict[str, Tuple[Callable[[], tvm.IRModule], str]] = {
    "rfc-conv2d": (rfc_conv2d, "the RFC's worked example: conv2d x(2,64,56,56) * w(32,64,3,3)"),
    "conv-relu-pool": (conv_relu_pool, "conv2d -> relu -> max_pool2d"),
    "residual": (residual_block, "two convs with bias, relu and a residual add"),
    "rgb-stem": (rgb_stem, "3-channel stem conv, depthwise conv, ReLU6, 2-channel head (channel padding)"),
    "mixed-consumers": (mixed_consumers, "one producer, two texture consumers and one buffer consumer"),
    "conv20": (lambda: conv_chain(20), "20 convs with bias, relu and residual adds (32 ch, 28x28)"),
}


def build_example(name: str) -> tvm.IRModule:
    """The example module called ``name``; unknown names list the known ones."""
    try:
        builder, _ = EXAMPLES[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; built-in examples: {', '.join(sorted(EXAMPLES))}") from None
    return builder()
