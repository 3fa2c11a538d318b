"""HoistImageStorage: image storages allocated once per VM, not on every call.

TVM's Relax VM executes every ``R.vm.alloc_storage`` of ``main`` on every call, and TVM's OpenCL
allocators keep no image between calls: each texture storage is a new ``clCreateImage`` per
inference (the per-call cost that drivers without ``cl_khr_image2d_from_buffer``, NVIDIA's and
pocl's, pay in full), and a freed storage goes into the allocator's pool, from which the VM's
``alloc_storage`` never takes one back (``docs/tvm_runtime.md``: every call adds its storages to
the process). The stock runtime has no builtin that keeps a storage across calls for OpenCL
(``vm.builtin.cuda_graph.get_cached_alloc`` does it for CUDA builds only), so this pass lifts the
image storages into a function of their own, as MLC-LLM lifts its KV cache, and leaves ``main``
as it was:

* ``F`` (unchanged): allocates its images on every call, as before; works for every caller;
* ``F`` + :data:`IMAGES` (no parameters): allocates ``F``'s hoistable image storages and returns
  them as a tuple;
* ``F`` + :data:`WITH_IMAGES` (``F``'s parameters, then that tuple): ``F`` with its image storages
  taken from the tuple instead of allocated.

:func:`relax_vk.load_vm` calls ``F__images`` once and routes ``vm["F"](...)`` through
``F__with_images``; a C++ caller does the same with the two functions (``examples/cpp_deploy``).

Runs after :class:`~relax_vk.passes.PlanTextureStorage` (relax_vk's finalize stage), whose image
storages (``alloc_storage`` in a texture scope) it reads.

Guarantees: a storage is hoisted only when no tensor allocated from it outlives the call: every
use of each of its tensors is a kernel call, a kill or a VM check in the same block, and none is
used after the block (a returned tensor, or one held in a tuple, keeps a per-call storage: a later
call would overwrite it). ``F`` itself is not changed. Both new functions carry
:data:`IMAGES_OF` (``F``'s name), so tools that count what one call allocates
(:func:`relax_vk.tools.vm_memory.vm_storages`) can skip them.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import tvm
from tvm import relax

from .plan_texture_storage import _ALLOC_STORAGE, _ALLOC_TENSOR, _KILL, _op_name, _reads_only, _uses

#: suffix of the function that allocates ``F``'s images
IMAGES = "__images"
#: suffix of ``F`` taking its images as a last parameter
WITH_IMAGES = "__with_images"
#: attribute naming ``F`` on both
IMAGES_OF = "relax_vk.images_of"


def _is_image_storage(binding) -> bool:
    if not isinstance(binding, relax.VarBinding) or _op_name(binding.value) != _ALLOC_STORAGE:
        return False
    shape, _, _, scope = binding.value.args
    return "texture" in str(getattr(scope, "value", "")) and isinstance(shape, relax.ShapeExpr)


def hoistable_storages(func: relax.Function, mod: tvm.IRModule) -> List[relax.Var]:
    """The image storages of ``func`` (top-level blocks) whose tensors all die within the call
    (module docstring), in program order."""
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return []
    out: List[relax.Var] = []
    blocks = list(body.blocks)
    for i, block in enumerate(blocks):
        used_after: Set[relax.Var] = _uses(body.body)
        for later in blocks[i + 1 :]:
            for b in later.bindings:
                used_after |= _uses(b.value)
        bindings = list(block.bindings)
        storages = [b.var for b in bindings if _is_image_storage(b)]
        if not storages:
            continue
        tensors: Dict[relax.Var, List[relax.Var]] = {s: [] for s in storages}
        for b in bindings:
            if _op_name(b.value) == _ALLOC_TENSOR and b.value.args[0] in tensors:
                tensors[b.value.args[0]].append(b.var)
        for s in storages:
            if s in used_after or not _storage_uses_ok(s, bindings):
                continue
            if all(_dies_in_block(t, bindings, used_after, mod) for t in tensors[s]):
                out.append(s)
    return out


def _storage_uses_ok(storage: relax.Var, bindings) -> bool:
    """The storage itself is only allocated from (as ``alloc_tensor``'s storage) and killed."""
    for b in bindings:
        if storage not in _uses(b.value):
            continue
        op = _op_name(b.value)
        if not (op == _KILL or (op == _ALLOC_TENSOR and b.value.args[0].same_as(storage))):
            return False
    return True


def _dies_in_block(tensor: relax.Var, bindings, used_after: Set[relax.Var], mod: tvm.IRModule) -> bool:
    if tensor in used_after:
        return False
    return all(_reads_only(b.value, mod) for b in bindings if tensor in _uses(b.value) and not b.var.same_as(tensor))


def _split(func: relax.Function, name: str, mod: tvm.IRModule) -> Optional[Tuple[relax.Function, relax.Function]]:
    """``(F__images, F__with_images)`` for ``func`` (named ``name``), None when nothing hoists."""
    copy = relax.utils.copy_with_new_vars(func)
    hoisted = hoistable_storages(copy, mod)
    if not hoisted:
        return None
    index = {v: k for k, v in enumerate(hoisted)}
    allocs: List[relax.Call] = [None] * len(hoisted)  # type: ignore[list-item]
    images_ty = relax.TupleType([relax.ObjectType() for _ in hoisted])
    images = relax.Var("images", images_ty)
    blocks = []
    for block in copy.body.blocks:
        out = []
        for b in block.bindings:
            if isinstance(b, relax.VarBinding) and b.var in index:
                allocs[index[b.var]] = b.value
                out.append(relax.VarBinding(b.var, relax.TupleGetItem(images, index[b.var])))
            else:
                out.append(b)
        blocks.append(relax.BindingBlock(out))
    with_images = relax.Function(
        list(copy.params) + [images], relax.SeqExpr(blocks, copy.body.body), copy.ret_ty, copy.is_pure, copy.attrs
    )
    fresh = [relax.Var(f"image{k}", relax.ObjectType()) for k in range(len(hoisted))]
    alloc_fn = relax.Function(
        [], relax.SeqExpr([relax.BindingBlock([relax.VarBinding(v, c) for v, c in zip(fresh, allocs)])], relax.Tuple(fresh)),
        images_ty, copy.is_pure,
    )  # fmt: skip
    named = lambda f, n: f.with_attr("global_symbol", n).with_attr(IMAGES_OF, name)  # noqa: E731
    return named(alloc_fn, name + IMAGES), named(with_images, name + WITH_IMAGES)


def _made_for(func, name: str) -> bool:
    return isinstance(func, relax.Function) and func.attrs is not None and str(func.attrs.get(IMAGES_OF, "")) == name


def HoistImageStorage() -> tvm.transform.Pass:
    """Adds ``F__images`` / ``F__with_images`` for every function ``F`` with hoistable image
    storages (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.HoistImageStorage")
    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        added = {}
        for gv, func in mod.functions_items():
            if not isinstance(func, relax.Function) or func.attrs is None or "global_symbol" not in func.attrs:
                continue
            if IMAGES_OF in func.attrs:
                continue
            name = str(func.attrs["global_symbol"])
            taken = [n for n in (name + IMAGES, name + WITH_IMAGES) if any(g.name_hint == n for g in mod.get_global_vars())]
            if taken:
                if all(_made_for(mod[n], name) for n in taken):
                    continue  # hoisted already (the pass ran before)
                raise ValueError(f"HoistImageStorage: the module already has a function named {taken[0]!r}")
            split = _split(func, name, mod)
            if split is not None:
                added[name + IMAGES], added[name + WITH_IMAGES] = split
        if not added:
            return mod
        out = mod.clone()
        for name, func in added.items():
            out[name] = relax.BlockBuilder().normalize(func)
        return out

    return transform
