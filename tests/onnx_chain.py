"""A small ONNX model with named nodes for the profile and bisect tests: three convs, two fused
with a relu, the last with a tanh."""

import numpy as np

from relax_vk.frontends import from_onnx

APIS = [("opencl", "pocl"), ("vulkan", "lavapipe")]


def onnx_chain(scale: float = 1.0):
    """x -> conv "first" -> relu "first_relu" -> conv "middle" -> relu "middle_relu" -> conv "last"
    -> tanh "squash". ``scale`` (not 1): the first conv's weights are +-``scale`` (exact in fp16)
    and the middle conv's are divided by it, so only the activations between them are large."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)) / np.sqrt(27)
    w1 = (w1 if scale == 1.0 else np.sign(w1) * scale).astype(np.float32)
    w2 = (rng.standard_normal((8, 8, 3, 3)) / np.sqrt(72) / scale).astype(np.float32)
    w3 = (rng.standard_normal((4, 8, 1, 1)) / np.sqrt(8)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="first", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["b"], name="first_relu"),
        helper.make_node("Conv", ["b", "w2"], ["c"], name="middle", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["d"], name="middle_relu"),
        helper.make_node("Conv", ["d", "w3"], ["e"], name="last"),
        helper.make_node("Tanh", ["e"], ["y"], name="squash"),
    ]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"))],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain_model(scale: float = 1.0):
    """:func:`onnx_chain` imported."""
    return from_onnx(onnx_chain(scale))
