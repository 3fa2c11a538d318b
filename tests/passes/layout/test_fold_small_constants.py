import numpy as np
import pytest
from helpers_build import BACKENDS
from onnx_compress import compress_model
from tvm import relax

from relax_vk.passes import FoldSmallConstants

from helpers import assert_same_numbers, module, op_count, tensor


def test_folds_constant_subgraphs_and_keeps_the_rest():
    x = tensor("x", (1, 4, 2, 2))
    stats = relax.const(np.array([1.0, 2.0, 3.0, 4.0], "float32"))

    def body(bb, x):
        e = bb.emit(relax.op.expand_dims(stats, axis=[0, 2, 3]))
        s = bb.emit(relax.op.sqrt(bb.emit(relax.op.add(e, relax.const(np.float32(1e-5))))))
        return relax.op.divide(x, s)

    mod = module([x], body)
    out = FoldSmallConstants()(mod)
    assert op_count(out, "relax.expand_dims") == 0 and op_count(out, "relax.sqrt") == 0
    assert op_count(out, "relax.divide") == 1  # reads the input: not foldable
    assert_same_numbers(mod, out)


def test_roll_index_arithmetic_folds_and_take_indices_narrow_to_int32():
    """torch.roll's decomposition: arange(0, n) + shift, % n, then take: all constant."""
    x = tensor("x", (1, 6, 3))

    def body(bb, x):
        index = bb.emit(relax.op.arange(0, 6, 1, dtype="int64"))
        shifted = bb.emit(relax.op.mod(bb.emit(relax.op.add(index, relax.const(4, "int64"))), relax.const(6, "int64")))
        return relax.op.take(x, shifted, axis=1)

    mod = module([x], body)
    out = FoldSmallConstants()(mod)
    for op in ("relax.arange", "relax.add", "relax.mod"):
        assert op_count(out, op) == 0
    take = [b.value for b in out["main"].body.blocks[0].bindings if getattr(b.value, "op", None) is not None
            and getattr(b.value.op, "name", "") == "relax.take"][0]  # fmt: skip
    assert str(take.args[1].ty.dtype) == "int32"
    np.testing.assert_array_equal(take.args[1].value.numpy(), (np.arange(6) + 4) % 6)
    assert_same_numbers(mod, out)


def test_c_and_floor_modulo_fold_with_their_own_signs():
    x = tensor("x", (3,))
    a = relax.const(np.array([-7, 7, -8], "int32"))

    def body(bb, x):
        trunc = bb.emit(relax.op.mod(a, relax.const(3, "int32")))
        floor = bb.emit(relax.op.floor_mod(a, relax.const(3, "int32")))
        return relax.op.add(x, relax.op.astype(relax.op.add(bb.emit(relax.op.multiply(trunc, relax.const(10, "int32"))), floor), "float32"))

    out = FoldSmallConstants()(module([x], body))
    consts = [b.value.args[1] for b in out["main"].body.blocks[0].bindings if getattr(getattr(b.value, "op", None), "name", "") == "relax.multiply"]
    assert not consts  # folded away
    assert_same_numbers(module([x], body), out)


def test_onnx_gather_from_a_static_shape_folds_to_a_constant_index():
    """ONNX's Gather(Shape(x), i) with the negative-index where: every step constant once x's
    shape is static, so the take that uses it reads an int32 constant (Vulkan holds no int64)."""
    x = tensor("x", (3, 4, 5))

    def body(bb, x):
        dims = bb.emit(relax.op.shape_to_tensor(bb.emit(relax.op.shape_of(x))))
        size = bb.emit(relax.op.take(dims, relax.const(0, "int32"), axis=0, mode="wrap"))
        index = bb.emit(relax.op.add(relax.const(1, "int64"), bb.emit(relax.op.subtract(size, relax.const(3, "int64")))))
        index = bb.emit(relax.op.where(relax.const(False), relax.op.add(index, size), index))
        return relax.op.take(x, index, axis=0)

    mod = module([x], body)
    out = FoldSmallConstants()(mod)
    for op in ("relax.shape_to_tensor", "relax.add", "relax.where", "relax.subtract"):
        assert op_count(out, op) == 0
    assert op_count(out, "relax.take") == 1
    assert_same_numbers(mod, out)


def test_a_causal_mask_folds_to_one_constant():
    """PyTorch's ``is_causal`` mask: ``full(True)``, two aranges, a difference, ``<= 0``,
    ``logical_and``, then ``where`` between two variables bound to constants."""
    x = tensor("x", (1, 2, 5, 5))

    def body(bb, x):
        ones = bb.emit(relax.op.full((5, 5), relax.const(True, "bool"), "bool"))
        cols = bb.emit(relax.op.expand_dims(bb.emit(relax.op.arange(0, 5, 1, dtype="int64")), [-2]))
        rows = bb.emit(relax.op.expand_dims(bb.emit(relax.op.arange(0, 5, 1, dtype="int64")), [-1]))
        keep = bb.emit(relax.op.logical_and(bb.emit(relax.op.less_equal(bb.emit(relax.op.subtract(cols, rows)), relax.const(0, "int64"))), ones))
        zero, minus_inf = bb.emit(relax.const(0.0, "float32")), bb.emit(relax.const(-np.inf, "float32"))
        return relax.op.add(x, bb.emit(relax.op.where(keep, zero, minus_inf)))

    mod = module([x], body)
    out = FoldSmallConstants()(mod)
    assert op_count(out, "relax.where") == op_count(out, "relax.full") == op_count(out, "relax.arange") == 0
    assert op_count(out, "relax.add") == 1
    assert_same_numbers(mod, out)


def test_tril_and_broadcast_of_constants_fold():
    x = tensor("x", (2, 4, 4))

    def body(bb, x):
        lower = bb.emit(relax.op.tril(relax.const(np.ones((4, 4), "float32")), 1))
        return relax.op.multiply(x, bb.emit(relax.op.broadcast_to(lower, (2, 4, 4))))

    mod = module([x], body)
    out = FoldSmallConstants()(mod)
    assert op_count(out, "relax.tril") == op_count(out, "relax.broadcast_to") == 0
    assert_same_numbers(mod, out)


def test_results_with_no_elements_fold_to_empty_constants():
    """A slice that leaves nothing (begin == end; a begin past the end, which TVM types with a
    negative extent), what is computed from it, and the dataflow output: empty constants of the
    right shape; a concat drops its empty inputs."""
    x = tensor("x", (4, 6))

    def body(bb, x):
        same = bb.emit(relax.op.strided_slice(x, [1], [2], [2]))
        past = bb.emit(relax.op.strided_slice(x, [1], [5], [0]))
        relu = bb.emit(relax.op.nn.relu(past))
        whole = bb.emit(relax.op.concat([same, x, relu], axis=1))
        return relax.Tuple([relax.op.add(same, same), whole])

    out = FoldSmallConstants()(module([x], body))
    assert op_count(out, "relax.strided_slice") == 0 and op_count(out, "relax.nn.relu") == 0 and op_count(out, "relax.add") == 0
    assert op_count(out, "relax.concat") == 0  # one input left: the input itself
    values = {b.var: b.value for b in out["main"].body.blocks[0].bindings}

    def resolve(expr):
        while isinstance(expr, relax.Var) and expr in values:
            expr = values[expr]
        return expr

    empty, whole = (resolve(f) for f in resolve(out["main"].body.body).fields)
    assert empty.value.numpy().shape == (4, 0) and whole.same_as(out["main"].params[0])


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_compress_by_a_constant_condition_runs(tmp_path, backend, device, request):
    """TVM imports Compress as a nonzero of the condition with a data-dependent size; of a constant
    condition the indices fold (and the size they fix is bound), so the model is static."""
    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    ort = pytest.importorskip("onnxruntime")
    request.getfixturevalue(device)
    path = str(tmp_path / "compress.onnx")
    feeds = compress_model(path, condition_given=False)
    outs = load(relax_vk.build(from_onnx(path), target=backend).artifact(), device=device).run([feeds["x"]])
    for out, ref in zip(outs, ort.InferenceSession(path).run(None, {"x": feeds["x"]})):
        np.testing.assert_array_equal(out, ref)
