"""Hand-made programs for runtime tests (no compiler involved)."""

import numpy as np

from relax_vk.serialization.artifact import Artifact
from relax_vk.core.scope import scope_from_name


def copy_program(shape, scope_a, scope_b=None, target="opencl", dtype="float32"):
    """input buffer -> texture(scope_a) [-> texture(scope_b)] -> output buffer, as scope copies only."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    tensors = [{"id": 0, "name": "in", "shape": list(shape), "dtype": dtype, "scope": "global", "image": None, "kind": "input", "bytes": nbytes}]
    chain = [scope_a] + ([scope_b] if scope_b else [])
    for scope in chain:
        s = scope_from_name(scope)
        tensors.append({"id": len(tensors), "name": scope, "shape": list(shape), "dtype": dtype, "scope": scope,
                        "image": list(s.image_extents(shape).as_tuple()), "kind": "intermediate", "bytes": tensors[0]["bytes"]})  # fmt: skip
    tensors.append(dict(tensors[0], id=len(tensors), name="out", kind="intermediate"))
    steps = [{"op": "copy", "src": i, "dst": i + 1} for i in range(len(tensors) - 1)]
    program = {"format": "relax_vk.program", "target": target, "model": {}, "tensors": tensors, "kernels": [],
               "steps": steps, "inputs": [0], "outputs": [len(tensors) - 1]}  # fmt: skip
    return Artifact(program, "__kernel void relax_vk_noop(void) {}" if target == "opencl" else "")
