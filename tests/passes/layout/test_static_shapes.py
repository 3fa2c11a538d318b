"""CheckStaticShapes: a tensor whose shape depends on input values is refused by name."""

import pytest
from onnx_compress import compress_model

import relax_vk
from relax_vk.core.errors import UnsupportedError

pytest.importorskip("onnx")


def test_compress_by_a_run_time_condition_is_a_clear_error(tmp_path):
    from relax_vk.frontends import from_onnx

    path = str(tmp_path / "compress.onnx")
    compress_model(path, condition_given=True)
    for target in ("opencl", "vulkan"):
        with pytest.raises(UnsupportedError, match=r"relax.nonzero \(computing .*\): its shape \(num_nonzero\) depends on the input's values"):
            relax_vk.build(from_onnx(path), target=target)
