import pytest
from tvm import relax, te, topi

from relax_vk.passes import FoldScopeCopies, RemoveRedundantAssignments

from helpers import TARGET, op_count

TEX = relax.VDevice(TARGET, 0, "global.texture")
GLB = relax.VDevice(TARGET, 0, "global")
SHAPE = (1, 2, 4, 4, 4)


def _kernel(bb, name, fn, n_in=1, n_out=1):
    ins = [te.placeholder(SHAPE, name=f"a{i}") for i in range(n_in)]
    outs = fn(*ins)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return bb.add_func(te.create_prim_func(ins + list(outs)), name)


def _t(vdev):
    return relax.TensorType(SHAPE, "float32", vdev)


def _module(build):
    bb = relax.BlockBuilder()
    x = relax.Var("x", _t(GLB))
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(build(bb, x))
        bb.emit_func_output(gv)
    mod = bb.get()
    mod.update_global_info("vdevice", [GLB, TEX])
    return mod


def _call_scopes(mod):
    rows = []
    for b in mod["main"].body.blocks[0].bindings:
        v = b.value
        if isinstance(v, relax.Call) and v.op.name == "relax.call_tir":
            out = v.ty_args[0]
            outs = out.fields if isinstance(out, relax.TupleType) else [out]
            rows.append((v.args[0].name_hint, [str(t.vdevice.memory_scope) for t in outs]))
    return rows


def _fold(mod):
    out = RemoveRedundantAssignments()(FoldScopeCopies()(mod))
    relax.analysis.well_formed(out)
    return out


@pytest.mark.parametrize("produced,copied_to", [(TEX, GLB), (GLB, TEX)], ids=["texture-to-buffer", "buffer-to-texture"])
def test_copy_folds_into_its_producer(produced, copied_to):
    """Both directions fold (upstream folds only texture -> buffer)."""

    def build(bb, x):
        relu = _kernel(bb, "relu", topi.nn.relu)
        neg = _kernel(bb, "neg", topi.negative)
        y = bb.emit(relax.call_tir(relu, (x,), out_ty=_t(produced)))
        c = bb.emit(relax.op.to_vdevice(y, copied_to))
        return relax.call_tir(neg, (c,), out_ty=_t(GLB))

    out = _fold(_module(build))
    assert op_count(out, "relax.to_vdevice") == 0
    assert _call_scopes(out) == [("relu", [str(copied_to.memory_scope)]), ("neg", ["global"])]


def test_tuple_output_field_folds():
    def build(bb, x):
        two = _kernel(bb, "two", lambda a: [topi.nn.relu(a), topi.negative(a)], n_out=2)
        add = _kernel(bb, "add", topi.add, n_in=2)
        t = bb.emit(relax.call_tir(two, (x,), out_ty=[_t(TEX), _t(TEX)]))
        a = bb.emit(relax.TupleGetItem(t, 0))
        b = bb.emit(relax.TupleGetItem(t, 1))
        c = bb.emit(relax.op.to_vdevice(a, GLB))
        return relax.call_tir(add, (c, b), out_ty=_t(GLB))

    out = _fold(_module(build))
    assert op_count(out, "relax.to_vdevice") == 0
    assert _call_scopes(out)[0] == ("two", ["global", "global.texture"])


def test_copies_of_shared_values_are_kept():
    def build(bb, x):
        relu = _kernel(bb, "relu", topi.nn.relu)
        add = _kernel(bb, "add", topi.add, n_in=2)
        y = bb.emit(relax.call_tir(relu, (x,), out_ty=_t(TEX)))
        c = bb.emit(relax.op.to_vdevice(y, GLB))  # y is also read as a texture below
        return relax.call_tir(add, (c, y), out_ty=_t(GLB))

    out = _fold(_module(build))
    assert op_count(out, "relax.to_vdevice") == 1
    assert _call_scopes(out)[0] == ("relu", ["global.texture"])


def test_copies_of_parameters_are_kept():
    def build(bb, x):
        neg = _kernel(bb, "neg", topi.negative)
        c = bb.emit(relax.op.to_vdevice(x, TEX))
        return relax.call_tir(neg, (c,), out_ty=_t(GLB))

    out = _fold(_module(build))
    assert op_count(out, "relax.to_vdevice") == 1
