import numpy as np
import tvm
from tvm import relax

from relax_vk.analysis.reference import random_inputs, run_on_cpu, strip_scopes
from relax_vk.models import build_example

from helpers import scoped


def test_strip_scopes_removes_every_vdevice_and_copy():
    out = strip_scopes(scoped(build_example("mixed-consumers")))
    found = []

    def visit(e):
        ty = getattr(e, "ty", None)
        if isinstance(ty, relax.TensorType) and ty.vdevice is not None:
            found.append(e)
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name in ("relax.to_vdevice", "relax.hint_on_device"):
            found.append(e)

    relax.analysis.post_order_visit(out["main"], visit)
    assert found == []


def test_reference_detects_a_wrong_module():
    """The semantic checks can fail: a module with a flipped weight gives different numbers."""
    mod = build_example("rfc-conv2d")
    inputs = random_inputs(mod)
    good = run_on_cpu(scoped(mod), inputs)[0]
    bad_inputs = [inputs[0], -inputs[1]]
    bad = run_on_cpu(scoped(mod), bad_inputs)[0]
    assert not np.allclose(good, bad)
