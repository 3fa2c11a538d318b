"""The whole scope pipeline: the RFC worked example, semantics, well-formedness, bad input."""

import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

import relax_vk
from relax_vk.models import EXAMPLES, build_example
from relax_vk.passes import (
    CollectConsumerScopeInfo,
    CollectProducerScopeInfo,
    DefineVDevice,
    PartialLegalize,
    RemoveRedundantAssignments,
)

from helpers import TARGET, assert_same_numbers, call_scopes, const, copies, module, scoped, tensor

TGT = TARGET


# fmt: off
# check_well_formed=False: the conv2d below gets its ty_args attached after parsing (see
# _with_op_ty_args); without them its inferred VDevice mixes its inputs' scopes.
@I.ir_module(check_well_formed=False)
class RFCExpected:
    I.module_global_infos({"vdevice": [
        I.vdevice(TGT, 0, "global"),
        I.vdevice(TGT, 0, "global.texture"),
        I.vdevice(TGT, 0, "global.texture-weight"),
    ]})

    # relax_vk legalizes layout transforms as gathers over the output (texel lane innermost)
    @T.prim_func(private=True, s_tir=True)
    def te_layout_transform(x: T.Buffer((T.int64(2), T.int64(64), T.int64(56), T.int64(56)), "float32"), te_layout_transform: T.Buffer((T.int64(2), T.int64(16), T.int64(56), T.int64(56), T.int64(4)), "float32")):
        T.func_attr({"op_pattern": 8, "relax_vk.source_op": "relax.layout_transform", "tirx.noalias": True})
        for i0, i1, i2, i3, i4 in T.grid(T.int64(2), T.int64(16), T.int64(56), T.int64(56), T.int64(4)):
            with T.sblock("te_layout_transform"):
                v_i0, v_i1, v_i2, v_i3, v_i4 = T.axis.remap("SSSSS", [i0, i1, i2, i3, i4])
                T.reads(x[v_i0, v_i1 * T.int64(4) + v_i4, v_i2, v_i3])
                T.writes(te_layout_transform[v_i0, v_i1, v_i2, v_i3, v_i4])
                te_layout_transform[v_i0, v_i1, v_i2, v_i3, v_i4] = x[v_i0, v_i1 * T.int64(4) + v_i4, v_i2, v_i3]

    @T.prim_func(private=True, s_tir=True)
    def te_layout_transform1(w: T.Buffer((T.int64(32), T.int64(64), T.int64(3), T.int64(3)), "float32"), te_layout_transform: T.Buffer((T.int64(8), T.int64(64), T.int64(3), T.int64(3), T.int64(4)), "float32")):
        T.func_attr({"op_pattern": 8, "relax_vk.source_op": "relax.layout_transform", "tirx.noalias": True})
        for i0, i1, i2, i3, i4 in T.grid(T.int64(8), T.int64(64), T.int64(3), T.int64(3), T.int64(4)):
            with T.sblock("te_layout_transform"):
                v_i0, v_i1, v_i2, v_i3, v_i4 = T.axis.remap("SSSSS", [i0, i1, i2, i3, i4])
                T.reads(w[v_i0 * T.int64(4) + v_i4, v_i1, v_i2, v_i3])
                T.writes(te_layout_transform[v_i0, v_i1, v_i2, v_i3, v_i4])
                te_layout_transform[v_i0, v_i1, v_i2, v_i3, v_i4] = w[v_i0 * T.int64(4) + v_i4, v_i1, v_i2, v_i3]

    @T.prim_func(private=True, s_tir=True)
    def te_layout_transform2(lv2: T.Buffer((T.int64(2), T.int64(8), T.int64(54), T.int64(54), T.int64(4)), "float32"), te_layout_transform: T.Buffer((T.int64(2), T.int64(32), T.int64(54), T.int64(54)), "float32")):
        T.func_attr({"op_pattern": 2, "relax_vk.source_op": "relax.layout_transform", "tirx.noalias": True})
        for i0, i1, i2, i3 in T.grid(T.int64(2), T.int64(32), T.int64(54), T.int64(54)):
            with T.sblock("te_layout_transform"):
                v_i0, v_i1, v_i2, v_i3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
                T.reads(lv2[v_i0, v_i1 // T.int64(4), v_i2, v_i3, v_i1 % T.int64(4)])
                T.writes(te_layout_transform[v_i0, v_i1, v_i2, v_i3])
                te_layout_transform[v_i0, v_i1, v_i2, v_i3] = lv2[v_i0, v_i1 // T.int64(4), v_i2, v_i3, v_i1 % T.int64(4)]

    @R.function
    def main(x: R.Tensor((2, 64, 56, 56), dtype="float32", vdevice="opencl:0:global"), w: R.Tensor((32, 64, 3, 3), dtype="float32", vdevice="opencl:0:global")) -> R.Tensor((2, 32, 54, 54), dtype="float32", vdevice="opencl:0:global"):
        cls = RFCExpected
        with R.dataflow():
            # the packed activation: a texture with H and W as the image axes
            lv = R.call_tir(cls.te_layout_transform, (x,), out_ty=R.Tensor((2, 16, 56, 56, 4), dtype="float32", vdevice="opencl:1:global.texture"))
            # the packed weight: the RFC's weight texture
            lv1 = R.call_tir(cls.te_layout_transform1, (w,), out_ty=R.Tensor((8, 64, 3, 3, 4), dtype="float32", vdevice="opencl:2:global.texture-weight"))
            # the conv output: a buffer, its only consumer is the layout transform back to NCHW
            lv2: R.Tensor((2, 8, 54, 54, 4), dtype="float32", vdevice="opencl:0:global") = R.nn.conv2d(lv, lv1, strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1, data_layout="NCHW4c", kernel_layout="OIHW4o", out_layout="NCHW4c", out_dtype="float32")
            gv = R.call_tir(cls.te_layout_transform2, (lv2,), out_ty=R.Tensor((2, 32, 54, 54), dtype="float32", vdevice="opencl:0:global"))
            R.output(gv)
        return gv
# fmt: on


def _with_op_ty_args(mod):
    """TVMScript 0.27 prints ``ty_args`` on regular ops but cannot parse them back: attach each
    annotated binding type to its conv2d call as ``ty_args`` (what DefineVDevice writes)."""
    func = mod["main"]
    block = func.body.blocks[0]
    bb = relax.BlockBuilder()
    bindings = []
    for b in block.bindings:
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.nn.conv2d":
            v = bb.normalize(relax.Call(v.op, v.args, v.attrs, [b.var.ty]))
        bindings.append(relax.VarBinding(b.var, v))
    body = relax.SeqExpr([relax.DataflowBlock(bindings)], func.body.body)
    mod = mod.clone() if hasattr(mod, "clone") else mod
    mod["main"] = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)
    return relax.transform.Normalize()(mod)


def test_rfc_worked_example():
    """The RFC's listing, with the RFC's registry (layout transforms read buffers)."""
    out = scoped(build_example("rfc-conv2d"), registry=relax_vk.rfc_registry())
    tvm.ir.assert_structural_equal(out, _with_op_ty_args(RFCExpected))


def test_rfc_example_with_the_default_registry():
    """relax_vk's default: the unpacking transform reads the conv's output from a texture."""
    rows = call_scopes(scoped(build_example("rfc-conv2d")))
    conv = [r for r in rows if r[0] == "relax.nn.conv2d"][0]
    assert conv[1] == ["global.texture", "global.texture-weight"] and conv[2] == ["global.texture"]
    assert rows[-1][1] == ["global.texture"] and rows[-1][2] == ["global"]


def test_rfc_example_with_weights_in_buffers():
    out = scoped(build_example("rfc-conv2d"), options=relax_vk.ScopeOptions(weights_in_texture=False))
    conv = [r for r in call_scopes(out) if r[0] == "relax.nn.conv2d"][0]
    assert conv[1] == ["global.texture", "global"]
    assert copies(out) == []


def test_no_textures_option_gives_an_all_buffer_plan():
    out = scoped(build_example("conv20"), options=relax_vk.ScopeOptions(textures=False))
    plan = relax_vk.plan(out)
    assert plan.texture_bytes == 0 and plan.copies == 0


def test_vulkan_gets_the_same_plan():
    mod = build_example("residual")
    ocl = relax_vk.plan(scoped(mod, relax_vk.target.opencl())).to_json()
    vk = relax_vk.plan(scoped(mod, relax_vk.target.vulkan())).to_json()
    assert [t["scope"] for t in ocl["tensors"]] == [t["scope"] for t in vk["tensors"]]
    vk_mod = scoped(mod, relax_vk.target.vulkan())
    assert all(v.target.kind.name == "vulkan" for v in vk_mod.global_infos["vdevice"])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_well_formed_after_every_pass_and_semantics_kept(name):
    mod = build_example(name)
    stages = [
        relax_vk.layout_stage(),
        PartialLegalize(),
        CollectConsumerScopeInfo(TARGET),
        CollectProducerScopeInfo(TARGET),
        DefineVDevice(TARGET),
        relax.transform.RealizeVDevice(),
        RemoveRedundantAssignments(),
    ]
    out = mod
    for stage in stages:
        out = stage(out)
        relax.analysis.well_formed(out)
    assert_same_numbers(mod, out)


def test_usable_inside_a_sequential():
    seq = tvm.transform.Sequential([relax.transform.Normalize(), relax_vk.scope_pipeline(TARGET), relax.transform.DeadCodeElimination()])
    out = seq(build_example("conv-relu-pool"))
    assert "vdevice" in out.global_infos


# ---------------------------------------------------------------- small modules


def _conv(x, cin, cout, seed, k=3):
    return relax.op.nn.conv2d(x, const((cout, cin, k, k), seed), padding=(k // 2, k // 2))


def test_conv_relu():
    x = tensor("x", (1, 8, 12, 12))
    mod = module([x], lambda bb, x: relax.op.nn.relu(bb.emit(_conv(x, 8, 8, 1))))
    out = scoped(mod)
    assert copies(out) == []
    assert_same_numbers(mod, out)


def test_conv_pool_keeps_conv_output_in_texture():
    mod = build_example("conv-relu-pool")
    out = scoped(mod)
    rows = call_scopes(out)
    conv = [r for r in rows if r[0] == "relax.nn.conv2d"][0]
    pool = [r for r in rows if r[0] == "relax.nn.max_pool2d"][0]
    # relu is synced with the pool's input; the pool reads and writes textures, and the final
    # layout transform reads the pool's texture (upstream: a texture output and a folded copy)
    assert pool[1] == ["global.texture"] and pool[2] == ["global.texture"]
    assert conv[2] == ["global.texture"]
    assert copies(out) == []


def test_concat_and_split():
    x = tensor("x", (1, 8, 10, 10))

    def body(bb, x):
        a = bb.emit(_conv(x, 8, 8, 1))
        b = bb.emit(_conv(x, 8, 8, 2))
        cat = bb.emit(relax.op.concat([a, b], axis=1))
        parts = bb.emit(relax.op.split(cat, 2, axis=1))
        p = bb.emit(relax.op.add(bb.emit(relax.TupleGetItem(parts, 0)), bb.emit(relax.TupleGetItem(parts, 1))))
        return _conv(p, 8, 8, 3)

    mod = module([x], body)
    out = scoped(mod)
    rows = call_scopes(out)
    assert [r for r in rows if r[0].startswith("concatenate")][0][2] == ["global.texture"]
    assert [r for r in rows if r[0].startswith("split")][0][2] == ["global.texture"] * 2
    assert copies(out) == []
    assert_same_numbers(mod, out)


def test_tuple_outputs_are_buffers():
    x = tensor("x", (1, 8, 10, 10))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(_conv(x, 8, 8, 1))
            r = bb.emit(relax.op.nn.relu(a))
            t = bb.emit_output(relax.Tuple([a, r]))
        bb.emit_func_output(t)
    mod = bb.get()
    out = scoped(mod)
    ret = out["main"].ret_ty
    assert all(str(f.vdevice.memory_scope) == "global" for f in ret.fields)
    assert_same_numbers(mod, out)


def test_shape_too_large_for_any_texture_stays_buffer():
    x = tensor("x", (1, 4, 4, 20000))  # width 20000 > 16384 in every mapping but weight (too wide too)
    mod = module([x], lambda bb, x: relax.op.nn.relu(bb.emit(_conv(x, 4, 4, 1, k=1))))
    out = scoped(mod)
    plan = relax_vk.plan(out)
    activations = [t for t in plan.tensors if t.shape and 20000 in t.shape]
    assert len(activations) >= 3 and all(t.scope == "global" for t in activations)
    assert plan.texture_bytes == 64  # only the small 1x1 weight fits a texture
    assert_same_numbers(mod, out)


def test_small_device_limits_fall_back_per_tensor():
    mod = build_example("rfc-conv2d")
    out = scoped(mod, relax_vk.target.opencl(spatial_limit=600, depth_limit=32))
    conv = [r for r in call_scopes(out) if r[0] == "relax.nn.conv2d"][0]
    # 56x56 with 32 layers still fits global.texture; the weight (576 wide) fits the weight mapping
    assert conv[1] == ["global.texture", "global.texture-weight"]
    out = scoped(mod, relax_vk.target.opencl(spatial_limit=500, depth_limit=16))
    conv = [r for r in call_scopes(out) if r[0] == "relax.nn.conv2d"][0]
    # now the activation fits no mapping (32 layers, or 3136 wide); the weight is 576 wide in
    # the weight mapping but fits nhwc (9 wide, 64 high, 8 layers)
    assert conv[1] == ["global", "global.texture-nhwc"]


# ---------------------------------------------------------------- bad input stays safe


def test_dynamic_shapes_stay_buffers():
    n = tvm.tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n, 8, 16, 16), "float32"))
    mod = module([x], lambda bb, x: relax.op.nn.relu(bb.emit(_conv(x, 8, 8, 1))))
    out = scoped(mod)
    assert relax_vk.plan(out).texture_bytes == 0
    relax.analysis.well_formed(out)


@pytest.mark.parametrize("dtype", ["int8", "bool"])
def test_int8_and_bool_tensors_stay_buffers(dtype):
    x = tensor("x", (1, 2, 8, 8, 4), dtype)
    op = relax.op.logical_not if dtype == "bool" else relax.op.negative
    mod = module([x], lambda bb, x: op(bb.emit(op(x))))
    out = scoped(mod)
    assert relax_vk.plan(out).texture_bytes == 0
    assert_same_numbers(mod, out)


def test_calls_to_other_functions_and_extern_functions():
    bb = relax.BlockBuilder()
    y = tensor("y", (1, 2, 8, 8, 4))
    with bb.function("helper", [y]):
        with bb.dataflow():
            r = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(r)
    x = tensor("x", (1, 8, 8, 8))
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(_conv(x, 8, 8, 1))
            packed = bb.emit(relax.op.layout_transform(c, lambda n, ch, h, w: (n, ch // 4, h, w, ch % 4)))
            h = bb.emit(relax.Call(bb.get().get_global_var("helper"), [packed]))
            e = bb.emit(relax.call_dps_packed("my_extern_fn", [h], out_ty=relax.TensorType((1, 2, 8, 8, 4), "float32")))
            gv = bb.emit_output(relax.op.add(h, e))
        bb.emit_func_output(gv)
    mod = bb.get()
    out = scoped(mod)
    relax.analysis.well_formed(out)
    rows = call_scopes(out)
    helper_call = [r for r in rows if "helper" in r[0]][0]
    assert helper_call[1] == ["global"]  # arguments of a function call are buffers
    extern = [r for r in rows if r[0] == "relax.call_dps_packed"][0]
    assert extern[1] == ["global"]


def test_function_without_dataflow_block_is_all_buffers():
    bb = relax.BlockBuilder()
    x = tensor("x", (1, 8, 8, 8))
    with bb.function("main", [x]):
        c = bb.emit(_conv(x, 8, 8, 1))
        r = bb.emit(relax.op.nn.relu(c))
        bb.emit_func_output(r)
    mod = bb.get()
    out = scoped(mod)
    relax.analysis.well_formed(out)
    assert relax_vk.plan(out).texture_bytes == 0
    assert_same_numbers(mod, out)


def test_passes_leave_their_input_module_unchanged():
    mod = build_example("mixed-consumers")
    packed = PartialLegalize()(relax_vk.layout_stage()(mod))
    before = packed.script(show_meta=True)
    first = scoped(mod)
    for stage in (CollectConsumerScopeInfo(TARGET), CollectProducerScopeInfo(TARGET), DefineVDevice(TARGET)):
        stage(packed)
        assert packed.script(show_meta=True) == before
    assert "vdevice" not in packed.global_infos
    # running the pipeline again on the same module gives the same result
    tvm.ir.assert_structural_equal(scoped(mod), first)


def test_residual_block():
    mod = build_example("residual")
    out = scoped(mod)
    rows = call_scopes(out)
    convs = [r for r in rows if r[0] == "relax.nn.conv2d"]
    # both convs read textures (activation and weight mappings)
    assert all(r[1] == ["global.texture", "global.texture-weight"] for r in convs)
    # the first conv's bias/relu chain stays in texture for the second conv
    assert convs[0][2] == ["global.texture"]
    # the skip add is all-synced with its output, which the unpacking transform reads as a
    # texture: everything stays in textures, no copy
    assert copies(out) == []
    assert_same_numbers(mod, out)
    # under the RFC's registry the unpacking transform reads a buffer: the skip add's output is a
    # buffer, so the packed input it shares with the first conv is copied once (upstream's vote
    # would copy per texture consumer)
    rfc = scoped(mod, registry=relax_vk.rfc_registry())
    assert copies(rfc) == [("global.texture", "global")]
    assert_same_numbers(mod, rfc)


def test_get_pipeline_resolves_its_target_once(monkeypatch):
    """The target argument (None: the current target) is resolved once by the public function and
    the resolved ``Target`` is handed down to every stage and pass: a pipeline built under one
    current target keeps it when it runs under another."""
    from relax_vk.core import target as target_mod

    looked_up = []
    real = target_mod.resolve
    monkeypatch.setattr(target_mod, "resolve", lambda t=None: (looked_up.append(t) if not isinstance(t, tvm.target.Target) else None) or real(t))
    with relax_vk.target.vulkan(spatial_limit=32):
        pipeline = relax_vk.get_pipeline()
        scoping = relax_vk.scope_pipeline()
    assert looked_up == [None, None]  # one lookup per public call, none by the stages or passes inside
    with relax_vk.target.opencl():
        mod = scoping(build_example("rfc-conv2d"))
    assert looked_up == [None, None]
    acts = [t for t in relax_vk.plan(mod).tensors if t.shape == [2, 16, 56, 56, 4]]
    assert acts and acts[0].scope == "global"  # the 32-texel limit of the target current at construction
    assert isinstance(pipeline, tvm.transform.Pass)


@pytest.mark.parametrize("api", ["opencl", "vulkan"])
def test_the_named_stages_are_what_the_pipelines_run(api):
    """scope_pipeline and lowering_stage are made of relax_vk.pipeline.STAGES, in order: running
    the resolved stages one by one gives the same modules (what ``relax-vk show`` and the notebook
    print is what ``plan`` and ``build`` run)."""
    from relax_vk.pipeline import GROUPS, STAGES, stages

    target = relax_vk.target.vulkan() if api == "vulkan" else relax_vk.target.opencl()
    named = stages(target, groups=GROUPS)
    assert {s.group for s in STAGES} == set(GROUPS)
    # in STAGES' order; every stage for Vulkan, all but RetargetVDevices for OpenCL (nothing to do)
    expected = [s for s in STAGES if api == "vulkan" or s.name != "RetargetVDevices"]
    assert [s for s, _ in named] == expected
    assert [s.number for s in STAGES] == sorted(s.number for s in STAGES)
    mod = build_example("conv-relu-pool")
    scoped = lowered = mod
    for stage, run in named:
        if stage.group != "lowering":
            scoped = lowered = run(scoped)
        else:
            lowered = run(lowered)
    tvm.ir.assert_structural_equal(scoped, relax_vk.scope_pipeline(target)(mod))
    tvm.ir.assert_structural_equal(lowered, relax_vk.lowering_stage(target)(scoped))
    with pytest.raises(ValueError, match="unknown pipeline groups"):
        stages(target, groups=("layout", "codegen"))
