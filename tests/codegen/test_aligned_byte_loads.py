"""aligned_byte_loads: TVM's ``vloadN`` of bytes from a kernel's ``char``/``uchar`` buffer becomes one
aligned ``charN`` load (NVIDIA's compiler loaded the bytes one by one); float loads and other
buffers are left as they are, and an int8 model built with it is right on pocl."""

import numpy as np
import pytest

from relax_vk.codegen.opencl import aligned_byte_loads

SOURCE = """__kernel void k(__global float* restrict a, __global char* restrict w, __global uchar* restrict u, int o);
__kernel void k(__global float* restrict a, __global char* restrict w, __global uchar* restrict u, int o) {
  float4 x = vload4(0, a + (o * 4));
  vstore4(vload4(0, w + ((o * 36) + (min(o, 3) * 4))), 0, l + 0);
  uchar8 y = vload8(0, u + (o * 8));
}
__kernel void j(__global float* restrict w) { float4 z = vload4(0, w + 4); }
"""


def test_byte_vector_loads_become_aligned_loads_and_nothing_else_changes():
    out = aligned_byte_loads(SOURCE)
    assert "vstore4((*((__global char4*)(w + ((o * 36) + (min(o, 3) * 4))))), 0, l + 0);" in out
    assert "uchar8 y = (*((__global uchar8*)(u + (o * 8))));" in out
    assert "float4 x = vload4(0, a + (o * 4));" in out  # a float buffer
    assert "float4 z = vload4(0, w + 4);" in out  # another kernel's w is a float buffer
    assert aligned_byte_loads(out) == out


def test_an_int8_conv_reads_aligned_words_and_is_right(pocl):
    torch = pytest.importorskip("torch")
    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    q = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
    scale = (rng.random(16) * 0.02 + 0.01).astype(np.float32)
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
        helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 10, 10])],
        [onnx.numpy_helper.from_array(q, "wq"), onnx.numpy_helper.from_array(scale, "ws"), onnx.numpy_helper.from_array(np.zeros(16, np.int8), "wz")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    from relax_vk.core.options import ScopeOptions

    # int8 weights in a buffer (the path of a weight holding -128, or of a device without snorm8
    # images); in textures they are snorm8 texels (passes.scope.quantized_weight_texels)
    compiled = relax_vk.build(from_onnx(model), "opencl", options=ScopeOptions(weights_in_texture=False))
    assert "(__global char4*)" in compiled.artifact().source and "vload4(0, param_0_ptr" not in compiled.artifact().source
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = torch.tensor(q.astype(np.float32) * scale[:, None, None, None])
    want = torch.nn.functional.conv2d(torch.tensor(x), w, padding=1).numpy()
    np.testing.assert_allclose(load(compiled.artifact(), device=pocl).run([x])[0], want, rtol=1e-4, atol=1e-4)
