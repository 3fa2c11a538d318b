"""PlaceBufferStorage: no byte storage of TVM's VM is allocated through a texture VDevice, whose
allocator (naive, under load_vm) never hands a freed buffer back (no GPU: read from the program)."""

import pytest
import tvm
from tvm import relax

import relax_vk
from relax_vk.passes import PlaceBufferStorage, PlanTextureStorage, RoundBufferStorage
from relax_vk.passes.lower.place_buffer_storage import misplaced_buffer_storages
from relax_vk.passes.lower.plan_texture_storage import vdevices
from relax_vk.passes.lower.record_vdevices import vdevice_table
from relax_vk.tools.vm_memory import vm_storages

from helpers import small_classifier

from .test_plan_texture_storage import _before_plan


def _texture_devices(mod):
    return {i for i, d in enumerate(vdevices(mod)) if "texture" in str(d.memory_scope)}


@pytest.fixture(scope="module")
def without_pass():
    """The finalize stage up to RoundBufferStorage, without PlaceBufferStorage (what was built before)."""
    return RoundBufferStorage()(PlanTextureStorage()(_before_plan(small_classifier())))


def test_the_model_has_a_byte_storage_on_a_texture_vdevice_without_the_pass(without_pass):
    textures = _texture_devices(without_pass)
    misplaced = [s for s in vm_storages(without_pass) if not s.is_texture and s.device in textures]
    assert misplaced, "the model no longer exercises the case (TVM's planner changed?)"
    assert misplaced_buffer_storages(without_pass)


def test_built_program_allocates_no_byte_storage_on_a_texture_vdevice():
    compiled = relax_vk.build(small_classifier(), "opencl")
    mod = compiled.vm_module
    textures = _texture_devices(mod)
    storages = vm_storages(mod)
    assert any(s.is_texture for s in storages)  # a texture plan
    assert all(s.device in textures for s in storages if s.is_texture)
    assert [s.name for s in storages if not s.is_texture and s.device in textures] == []
    assert misplaced_buffer_storages(mod) == []
    # no VDevice was added: the module's own "global" VDevice serves the buffers
    assert [row["memory_scope"] for row in vdevice_table(mod)] == [str(d.memory_scope) for d in vdevices(_before_plan(small_classifier()))]


def test_pass_moves_the_storage_to_the_global_twin_and_changes_nothing_else(without_pass):
    after = PlaceBufferStorage()(without_pass)
    devices = vdevices(after)
    before, moved = vm_storages(without_pass), 0
    assert len(vm_storages(after)) == len(before)
    for s, old in zip(vm_storages(after), before):  # (program order)
        assert (s.scope, s.dtype, s.shape, s.tensors) == (old.scope, old.dtype, old.shape, old.tensors)
        if old.device != s.device:
            assert not s.is_texture and str(devices[s.device].memory_scope) == "global"
            assert int(devices[s.device].vdevice_id) == int(devices[old.device].vdevice_id)
            moved += 1
    assert moved == len(misplaced_buffer_storages(without_pass)) > 0
    assert misplaced_buffer_storages(after) == []
    assert PlaceBufferStorage()(after).same_as(after) or tvm.ir.structural_equal(PlaceBufferStorage()(after), after)


def test_a_global_vdevice_is_appended_where_the_module_has_none(without_pass):
    # drop the "global" VDevice's role: make VDevice 0 a texture one, so no twin exists
    devices = vdevices(without_pass)
    textures = sorted(_texture_devices(without_pass))
    mod = without_pass.clone()
    target = devices[textures[0]].target
    renamed = [relax.VDevice(target, int(d.vdevice_id), str(d.memory_scope) if i else "global.texture") for i, d in enumerate(devices)]
    mod.update_global_info("vdevice", renamed)
    after = PlaceBufferStorage()(mod)
    new = vdevices(after)
    assert len(new) == len(renamed) + 1 and str(new[-1].memory_scope) == "global"
    assert [str(d.memory_scope) for d in new[:-1]] == [str(d.memory_scope) for d in renamed]  # indices kept
    assert misplaced_buffer_storages(after) == []
