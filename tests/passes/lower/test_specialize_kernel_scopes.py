from tvm import relax, topi

from relax_vk.passes import SpecializeKernelScopes

from helpers import TARGET

TEX = relax.VDevice(TARGET, 0, "global.texture")
GLB = relax.VDevice(TARGET, 0, "global")
SHAPE = (1, 2, 4, 4, 4)


def _t(vdev):
    return relax.TensorType(SHAPE, "float32", vdev)


def _module(first_out, second_out):
    """One legalized PrimFunc, ``relu``, called twice: x -> first_out -> second_out."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", _t(GLB))
    with bb.function("main", [x]):
        with bb.dataflow():
            proto = bb.call_te(topi.nn.relu, x, primfunc_name_hint="relu")
            y = bb.emit(relax.Call(proto.op, proto.args, proto.attrs, [_t(first_out)]))
            z = bb.emit(relax.Call(proto.op, [proto.args[0], relax.Tuple([y])], proto.attrs, [_t(second_out)]))
            gv = bb.emit_output(z)
        bb.emit_func_output(gv)
    mod = bb.get()
    mod.update_global_info("vdevice", [GLB, TEX])
    return mod


def _calls(mod):
    return [b.value for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call) and b.value.op.name == "relax.call_tir"]


def sites_match_their_kernels(mod) -> bool:
    """Every call site's argument/output scopes equal its PrimFunc's buffer scopes."""
    for v in _calls(mod):
        want = [str(a.ty.vdevice.memory_scope) for a in v.args[1].fields] + [str(v.ty_args[0].vdevice.memory_scope)]
        have = [str(p.ty.storage_scope) for p in mod[v.args[0]].params]
        if want != have:
            return False
    return True


def test_different_call_site_scopes_get_their_own_clones():
    out = SpecializeKernelScopes()(_module(TEX, GLB))
    relax.analysis.well_formed(out)
    assert [c.args[0].name_hint for c in _calls(out)] == ["relu_0", "relu_1"]
    assert sites_match_their_kernels(out)
    assert [str(p.ty.storage_scope) for p in out[out.get_global_var("relu_0")].params] == ["global", "global.texture"]
    assert [str(p.ty.storage_scope) for p in out[out.get_global_var("relu_1")].params] == ["global.texture", "global"]
    assert "relu" not in [gv.name_hint for gv in out.get_global_vars()]


def test_upstream_last_call_site_wins_and_this_check_catches_it():
    upstream = relax.transform.SpecializePrimFuncBasedOnCallSite()(_module(TEX, GLB))
    # one kernel for both sites, specialized for one of them: the other reads the wrong memory
    assert len({c.args[0].name_hint for c in _calls(upstream)}) == 1
    assert not sites_match_their_kernels(upstream)


def test_single_signature_is_specialized_in_place():
    out = SpecializeKernelScopes()(_module(TEX, TEX))
    assert sites_match_their_kernels(out)
    # x (buffer) -> texture and texture -> texture are two signatures; texture->texture twice is one
    out = SpecializeKernelScopes()(_module(GLB, GLB))
    assert [c.args[0].name_hint for c in _calls(out)] == ["relu", "relu"]
    assert bool(out[out.get_global_var("relu")].attrs["relax_vk.scoped"])
    assert sites_match_their_kernels(out)
