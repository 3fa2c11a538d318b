"""Testing tools that ship with relax_vk (like ``tvm.testing``): the differential fuzzer
(:mod:`.fuzz`). They need the ``torch`` and ``onnx`` extras and a pocl / lavapipe device."""
