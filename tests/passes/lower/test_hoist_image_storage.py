"""HoistImageStorage / RoundBufferStorage: what TVM's VM allocates per call after relax_vk's
finalize stage (no GPU: read from the compiled program)."""

import pytest
from tvm import relax

import relax_vk
from relax_vk.frontends import load_model
from relax_vk.passes import HoistImageStorage, PlanTextureStorage
from relax_vk.passes.lower.hoist_image_storage import IMAGES, IMAGES_OF, WITH_IMAGES, hoistable_storages
from relax_vk.passes.lower.round_buffer_storage import PAGE
from relax_vk.tools.vm_memory import vm_storages

from .test_plan_texture_storage import _before_plan


def _storage_calls(func):
    return [b for block in func.body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and str(getattr(b.value.op, "name", "")) == "relax.vm.alloc_storage"]  # fmt: skip


@pytest.fixture(scope="module", params=["mixed-consumers", "squeezenet"])
def vm_module(request):
    return relax_vk.build(load_model(request.param)[0], "opencl").vm_module


def test_main_with_images_allocates_no_image(vm_module):
    main, alloc, with_images = vm_module["main"], vm_module["main" + IMAGES], vm_module["main" + WITH_IMAGES]
    assert str(alloc.attrs[IMAGES_OF]) == str(with_images.attrs[IMAGES_OF]) == "main"
    images = [b.value for b in _storage_calls(main) if "texture" in str(b.value.args[3].value)]
    hoisted = [b.value for b in _storage_calls(alloc)]
    assert images and len(hoisted) == len(images)  # these models return no texture tensor: every image hoists
    # the same images, in the same order, and main__with_images allocates none
    assert [tuple(int(d) for d in c.args[0].values) for c in hoisted] == [tuple(int(d) for d in c.args[0].values) for c in images]
    assert all("texture" not in str(b.value.args[3].value) for b in _storage_calls(with_images))
    assert len(with_images.params) == len(main.params) + 1
    assert len(alloc.ret_ty.fields) == len(hoisted)
    # per-call accounting counts main only
    assert {s.function for s in vm_storages(vm_module)} == {"main"}


def test_buffer_storages_are_whole_pages(vm_module):
    buffers = [s for s in vm_storages(vm_module) if not s.is_texture and s.device >= 0]
    assert buffers
    assert all(s.bytes % PAGE == 0 for s in buffers)


def test_a_storage_whose_tensor_outlives_the_call_stays_per_call():
    before = PlanTextureStorage()(_before_plan(load_model("mixed-consumers")[0]))
    func = before["main"]
    bindings = list(func.body.blocks[0].bindings)
    devices = before.global_infos["vdevice"]
    image_of = {b.var: b.value.args[0] for b in bindings
                if isinstance(b.value, relax.Call) and str(getattr(b.value.op, "name", "")) == "relax.vm.alloc_tensor"
                and b.value.args[0] in {s.var for s in _storage_calls(func) if "texture" in str(s.value.args[3].value)}}  # fmt: skip
    assert len(hoistable_storages(func, before)) == len(set(image_of.values()))
    # return one texture tensor beside main's result: its image must be allocated per call
    held = next(iter(image_of))
    body = relax.SeqExpr([relax.BindingBlock(bindings)], relax.Tuple([func.body.body, held]))
    mod = before.clone()
    mod["main"] = relax.Function(func.params, body, relax.TupleType([func.body.body.ty, held.ty]), func.is_pure, func.attrs)
    mod = relax.transform.Normalize()(mod)
    kept = hoistable_storages(mod["main"], mod)
    assert image_of[held] not in kept and len(kept) == len(set(image_of.values())) - 1
    after = HoistImageStorage()(mod)
    assert len(after["main" + IMAGES].ret_ty.fields) == len(kept)


def test_a_module_without_image_storages_is_unchanged():
    # before PlanTextureStorage, TVM plans textures as byte storages: there is no image to hoist
    before = _before_plan(load_model("rfc-conv2d")[0])
    assert HoistImageStorage()(before).same_as(before)


def test_running_twice_adds_nothing_and_names_are_not_taken_over():
    before = PlanTextureStorage()(_before_plan(load_model("mixed-consumers")[0]))
    once = HoistImageStorage()(before)
    assert HoistImageStorage()(once).same_as(once)
    # a user function already named main__images (not made by the pass): a clear error
    clash = before.clone()
    clash["main" + IMAGES] = relax.Function([], relax.Tuple([]), relax.TupleType([])).with_attr("global_symbol", "main" + IMAGES)
    with pytest.raises(ValueError, match="main__images"):
        HoistImageStorage()(clash)
