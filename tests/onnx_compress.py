"""An ONNX Compress model for the constant-folding and static-shape tests."""

import numpy as np


def compress_model(path: str, condition_given: bool):
    """ONNX Compress of a (3, 4) tensor along axis 1 and flattened, by a constant condition (or
    by conditions given as inputs)."""
    import onnx  # (imported here: a test that skips without onnx can import this module)
    from onnx import TensorProto, helper, numpy_helper

    along, flat = np.array([True, False, True, True]), np.array([True, False, True] * 4)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])]
    if condition_given:
        inputs += [helper.make_tensor_value_info(n, TensorProto.BOOL, list(c.shape)) for n, c in (("along", along), ("flat", flat))]
    nodes = [helper.make_node("Compress", ["x", "along"], ["a"], axis=1), helper.make_node("Compress", ["x", "flat"], ["b"])]
    outputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, "k"]), helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n"])]
    inits = [] if condition_given else [numpy_helper.from_array(along, "along"), numpy_helper.from_array(flat, "flat")]
    onnx.save(helper.make_model(helper.make_graph(nodes, "compress", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 13)]), path)
    return {"x": np.random.default_rng(4).standard_normal((3, 4)).astype("float32"), "along": along, "flat": flat}

