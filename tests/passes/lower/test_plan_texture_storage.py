"""PlanTextureStorage: the storages TVM's VM allocates hold exactly their images' bytes, and no more
than relax_vk's own runtime holds (no GPU: read from the compiled program)."""

import copy
import math

import pytest

import relax_vk
from relax_vk.frontends import load_model
from relax_vk.passes.lower.plan_texture_storage import image_storage_shape, vdevices
from relax_vk.passes.lower.round_buffer_storage import PAGE
from relax_vk.core.scope import scope_from_name
from relax_vk.storage.lifetimes import image_bytes
from relax_vk.storage.program import allocations, assign_storage
from relax_vk.tools.vm_memory import vm_storages


def _own_held(program: dict) -> int:
    """Bytes of the own runtime's allocations for intermediates and outputs (what the VM allocates
    in ``main``; inputs are the caller's and constants are the executable's in both)."""
    objects, places = allocations(program)
    outside = {k for t, (k, _) in zip(program["tensors"], places) if t["kind"] in ("input", "constant")}
    return sum(int(a["bytes"]) for k, a in enumerate(objects) if k not in outside)


def _texture_pool(program: dict) -> int:
    return sum(int(v["with_reuse_bytes"]) for pool, v in program["memory"]["pools"].items() if pool.startswith("texture"))


def _whole_images(program: dict) -> dict:
    """The program with every texture in whole images of its own extents, as TVM's VM lays them out
    (its kernels take no origins): the own runtime's plan before textures were placed side by side."""
    p = copy.deepcopy(program)
    for t in p["tensors"]:
        if "origin" in t:
            del t["origin"]
            t["image"] = list(scope_from_name(t["scope"]).image_extents(t["shape"]).as_tuple())
    for step in p["steps"]:
        step["scalars"] = [sc for sc in step.get("scalars", []) if "origin" not in sc]
    for t in p["tensors"]:
        t.pop("storage", None)
        t.pop("offset", None)
    p.pop("storage", None)
    return assign_storage(p)[0]


@pytest.fixture(scope="module", params=["rfc-conv2d", "mixed-consumers", "residual", "mobilenet_v2"])
def compiled(request):
    return relax_vk.build(load_model(request.param)[0], "opencl")


def test_every_texture_storage_is_exactly_its_image(compiled):
    storages = vm_storages(compiled.vm_module)
    devices = vdevices(compiled.vm_module)
    textures = [s for s in storages if s.is_texture]
    assert textures, "no texture storage planned"
    for s in textures:
        assert s.dtype in ("float32", "float16") and s.bytes == image_bytes(s.image, s.dtype) == math.prod(s.shape) * (4 if s.dtype == "float32" else 2)
        assert s.shape[-1] == 4
        assert "texture" in str(devices[s.device].memory_scope)
        for shape, dtype in s.tensors:  # every tensor in it fits (TVM's VM checks its bytes)
            assert dtype == s.dtype and math.prod(shape) * (4 if dtype == "float32" else 2) <= s.bytes
    # no texture tensor is left in a byte storage, and no byte storage is allocated through a texture
    # VDevice (PlaceBufferStorage: its allocator, naive under load_vm, would never reuse it)
    for s in storages:
        if not s.is_texture:
            assert s.dtype == "uint8" and s.scope == "global"
            assert s.device < 0 or "texture" not in str(devices[s.device].memory_scope), s
            assert all(math.prod(shape) * (4 if d == "float32" else 2 if d == "float16" else 8) <= s.bytes for shape, d in s.tensors)


def test_vm_holds_no_more_than_the_own_runtime(compiled):
    """...with whole images, as the VM has them; with textures side by side the own runtime holds no
    more than the VM."""
    storages = vm_storages(compiled.vm_module)
    placed = compiled.artifact().program
    program = _whole_images(placed)
    vm_textures = sum(s.bytes for s in storages if s.is_texture)
    assert _texture_pool(placed) <= vm_textures <= _texture_pool(program)
    # byte storages are whole pages (RoundBufferStorage: TVM's pooled allocator rounds each to a page
    # anyway, and reuses it only when it is declared so): at most a page each above the own runtime
    buffers = [s for s in storages if not s.is_texture]
    assert sum(s.bytes for s in storages) <= _own_held(program) + (PAGE - 1) * len(buffers)


def test_equal_textures_share_an_image_when_their_lifetimes_allow():
    compiled = relax_vk.build(load_model("mixed-consumers")[0], "opencl")
    textures = [s for s in vm_storages(compiled.vm_module) if s.is_texture]
    assert sum(len(s.tensors) for s in textures) > len(textures)  # at least one image holds two tensors


def test_image_storage_shape_flattens_back_to_the_image():
    for scope in ("global.texture", "global.texture-nhwc"):
        shape = image_storage_shape((56, 54, 32), scope)
        assert scope_from_name(scope).image_extents(shape).as_tuple() == (56, 54, 32)
    assert image_storage_shape((576, 8, 1), "global.texture-weight") == (8, 576, 4)
    with pytest.raises(ValueError):
        image_storage_shape((576, 8, 2), "global.texture-weight")


def _before_plan(mod):
    """``mod`` through relax_vk's pipeline up to where PlanTextureStorage runs (after LowerRuntimeBuiltin)."""
    import tvm
    from tvm.ir.instrument import pass_instrument

    @pass_instrument
    class Capture:
        module = None

        def run_after_pass(self, m, info):
            if info.name == "LowerRuntimeBuiltin":
                Capture.module = m

    with tvm.transform.PassContext(instruments=[Capture()]):
        relax_vk.get_pipeline("opencl")(mod)
    return Capture.module


def test_a_tensor_that_may_live_on_in_another_value_shares_nothing_after_it():
    from tvm import relax

    from relax_vk.passes import PlanTextureStorage

    before = _before_plan(load_model("mixed-consumers")[0])
    shared = [s for s in vm_storages(PlanTextureStorage()(before)) if s.is_texture and len(s.tensors) > 1]
    assert shared
    # hold the first texture tensor in a tuple the function returns: it must keep its image to the end
    func = before["main"]
    bindings = list(func.body.blocks[0].bindings)
    first = next(b.var for b in bindings if isinstance(b.value, relax.Call) and str(getattr(b.value.op, "name", "")) == "relax.vm.alloc_tensor"
                 and "texture" in str(before.global_infos["vdevice"][int(b.value.args[4].value)].memory_scope))  # fmt: skip
    holder = relax.Var("holder", relax.TupleType([first.ty]))
    at = max(i for i, b in enumerate(bindings) if first in relax.analysis.free_vars(b.value) and str(getattr(b.value.op, "name", "")) != "relax.vm.kill_object")
    bindings.insert(at + 1, relax.VarBinding(holder, relax.Tuple([first])))
    body = relax.SeqExpr([relax.BindingBlock(bindings)], relax.Tuple([func.body.body, holder]))
    mod = before.clone()
    mod["main"] = relax.Function(func.params, body, relax.TupleType([func.body.body.ty, holder.ty]), func.is_pure, func.attrs)
    after = PlanTextureStorage()(relax.transform.Normalize()(mod))
    holding = [s for s in vm_storages(after) if s.is_texture and any(t == tuple(int(d) for d in first.ty.shape.values) for t, _ in s.tensors)]
    assert holding
    # the held tensor's image holds it alone
    storage_of = {b.var: b.value.args[0] for b in after["main"].body.blocks[0].bindings
                  if isinstance(b.value, relax.Call) and str(getattr(b.value.op, "name", "")) == "relax.vm.alloc_tensor"}  # fmt: skip
    held = storage_of[first]
    assert [v for v, s in storage_of.items() if s.same_as(held)] == [first]
