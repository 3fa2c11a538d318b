"""The storage assignment of an artifact's program: what the runtimes allocate.

:func:`assign_storage` plans a program (:func:`~relax_vk.storage.planner.plan_storage` over its
:func:`~relax_vk.storage.lifetimes.program_lifetimes`) and records the result in it::

    program["storage"] = [{"id", "bytes", "image": [w, h, layers] | null, "dtype": texel dtype | null,
                           "alignment": offset alignment in bytes (buffers)}]
    tensor["storage"]  = index of the allocation the tensor uses
    tensor["offset"]   = its byte offset in that allocation (buffers in an arena; else 0)
    tensor["origin"]   = [x0, y0]: where a placed texture's rectangle sits in its allocation's
                         image (:mod:`relax_vk.storage.rectangles`; only on placed textures)
    program["memory"]  = {"without_reuse_bytes", "with_reuse_bytes", "lower_bound_bytes", ...}

Model inputs, outputs and constants get an allocation of their own (the host writes and reads
them; they never alias an intermediate). A program without ``"storage"`` (written before storage
planning, or with reuse off) allocates every tensor separately: :func:`allocations` gives the
writer one view of both. :func:`storage_problem` states the invariant every assignment keeps: right
kind, format and size, aligned offsets (texture origins) inside the allocation, no two tensors
whose bytes (or texels) overlap in one allocation live at the same step, and no texture a step
writes in one image with another tensor the step binds (the planner's tests hold it; the native
library checks the same at every load, the one validator of what a file holds).
Standard library only.
"""

from __future__ import annotations

import copy
from typing import List, Optional, Sequence, Tuple

from .lifetimes import SHAREABLE_KINDS, TEXEL_ITEMSIZE, image_bytes, program_lifetimes, step_writes, stored_bytes, texel_dtype, touched_steps
from .offsets import ALIGNMENT
from .planner import StoragePlan, plan_storage


def _own(t: dict) -> dict:
    """An allocation for tensor ``t`` alone."""
    image = list(t["image"]) if t.get("image") else None
    return {"bytes": stored_bytes(t), "image": image, "dtype": texel_dtype(t) if image else None}


def assign_storage(
    program: dict,
    reuse: bool = True,
    arenas: bool = True,
    max_alloc_bytes: Optional[int] = None,
    alignment: int = ALIGNMENT,
    private: Sequence[str] = (),
    image_limit: int = 16384,
) -> Tuple[dict, StoragePlan]:
    """``(program with its storage assignment, the plan)``; ``program`` itself is not changed.
    ``reuse=False`` gives every tensor its own allocation; ``arenas=False`` keeps buffers in
    whole shared objects (no offsets); ``max_alloc_bytes``: the largest allocation the device
    makes (a larger buffer arena is not used); ``alignment``: of arena offsets, in bytes (a
    device that needs coarser offsets gives the misaligned tensors buffers of their own);
    ``private``: pools that do not share (``"buffer"``: a device policy, see
    :func:`~relax_vk.storage.planner.plan_storage`); ``image_limit``: the largest image width and
    height placed textures share."""
    program = copy.deepcopy(program)
    plan = plan_storage(program_lifetimes(program), reuse=reuse, arenas=arenas, alignment=alignment, arena_limit=max_alloc_bytes,
                        private=private, image_limit=image_limit)  # fmt: skip
    storage: List[dict] = []
    first_of_object = {}
    for t in program["tensors"]:
        obj = plan.assignment.get(t["id"])
        t["offset"] = plan.offsets.get(t["id"], 0)
        if "origin" in t:
            t["origin"] = list(plan.origins.get(t["id"], (0, 0)))
        if obj is None:
            t["storage"] = len(storage)
            storage.append(_own(t))
        elif obj in first_of_object:
            t["storage"] = first_of_object[obj]
        else:
            shared = plan.objects[obj]
            t["storage"] = first_of_object[obj] = len(storage)
            storage.append({"bytes": shared.bytes, "image": list(shared.image) if shared.image else None, "dtype": shared.dtype})
    for i, entry in enumerate(storage):
        entry["id"] = i
        if entry["image"] is None:
            entry["alignment"] = alignment
    program["storage"] = storage
    program["memory"] = plan.to_json()
    return program, plan


def allocations(program: dict) -> Tuple[List[dict], List[Tuple[int, int]]]:
    """``(allocations, (allocation index, byte offset) of each tensor)``: the program's storage
    assignment, or one allocation per tensor for a program without one."""
    if "storage" not in program:
        return [dict(_own(t), id=t["id"]) for t in program["tensors"]], [(t["id"], 0) for t in program["tensors"]]
    return list(program["storage"]), [(int(t["storage"]), int(t.get("offset", 0))) for t in program["tensors"]]


def allocated_bytes(program: dict) -> int:
    """Device memory the program's allocations take."""
    return sum(int(a["bytes"]) for a in allocations(program)[0])


def _origin(t: dict) -> Tuple[int, int, int]:
    """A texture's origin in its allocation's image (x0, y0, first layer); unplaced: the image's."""
    x0, y0 = t.get("origin") or (0, 0)
    return int(x0), int(y0), 0


def _images_overlap(t: dict, u: dict) -> bool:
    """Whether two textures of one allocation cover a common texel."""
    a, b = _origin(t), _origin(u)
    return all(a[j] < b[j] + u["image"][j] and b[j] < a[j] + t["image"][j] for j in range(3))


def storage_problem(program: dict) -> Optional[str]:
    """Why the program's storage assignment is unsafe or malformed (None when it is sound). A
    buffer allocation may hold 0 bytes (tensors of no elements; the runtimes allocate a word)."""
    if "storage" not in program:
        return None
    storage, tensors = program["storage"], program["tensors"]
    if not isinstance(storage, list):
        return "storage is not a list"
    for i, a in enumerate(storage):
        if not isinstance(a, dict) or a.get("id") != i or not isinstance(a.get("bytes"), int) or a["bytes"] < (1 if a.get("image") else 0):
            return f"allocation {i} is malformed: {a!r}"
        image = a.get("image")
        if image is not None:
            if not (isinstance(image, list) and len(image) == 3 and all(isinstance(v, int) and v > 0 for v in image)):
                return f"allocation {i}: image {image!r} is not three positive integers"
            if a.get("dtype") not in TEXEL_ITEMSIZE or image_bytes(image, a["dtype"]) != a["bytes"]:
                return f"allocation {i}: a {image} image of {a.get('dtype')!r} texels is not {a['bytes']} bytes"
    users: dict = {}
    for t in tensors:
        k, offset = t.get("storage"), t.get("offset", 0)
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(storage):
            return f"tensor {t['id']} ({t['name']}) uses allocation {k!r}, which does not exist ({len(storage)} allocations)"
        a = storage[k]
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or (offset and (t.get("image") or offset % int(a.get("alignment") or 1))):
            return f"tensor {t['name']}: offset {offset!r} is not an aligned offset of allocation {k} (alignment {a.get('alignment')})"
        if bool(t.get("image")) != (a["image"] is not None):
            kind = "a texture" if t.get("image") else "a buffer"
            return f"tensor {t['name']} is {kind} but allocation {k} is not"
        if t.get("image"):
            at = _origin(t)
            if a["dtype"] != texel_dtype(t) or any(o + need > have for o, need, have in zip(at, t["image"], a["image"])):
                return (f"tensor {t['name']} ({texel_dtype(t)} image {t['image']} at {list(at[:2])}) does not fit allocation {k} "
                        f"({a['dtype']} image {a['image']})")  # fmt: skip
        elif offset + int(t["bytes"]) > a["bytes"]:
            return f"tensor {t['name']} ({t['bytes']} bytes at offset {offset}) does not fit allocation {k} ({a['bytes']} bytes)"
        users.setdefault(k, []).append(t)
    span = touched_steps(program)
    outputs = set(program.get("outputs", []))
    for k, group in users.items():
        if len(group) == 1:
            continue
        for t in group:
            if t["kind"] not in SHAREABLE_KINDS or t["id"] in outputs:
                return f"tensor {t['name']} ({t['kind']}{', an output' if t['id'] in outputs else ''}) shares allocation {k}; only intermediates may"
        # sweep in step order: a tensor must not overlap the bytes of any tensor still live
        live: List[dict] = []
        for t in sorted(group, key=lambda t: span.get(t["id"], (-1, -1))):
            first, last = span.get(t["id"], (-1, -1))
            live = [u for u in live if span.get(u["id"], (-1, -1))[1] >= first]
            lo, hi = int(t.get("offset", 0)), int(t.get("offset", 0)) + int(t["bytes"])
            for u in live:
                u_lo = int(u.get("offset", 0))
                if _images_overlap(t, u) if t.get("image") else (u_lo < hi and lo < u_lo + int(u["bytes"])):
                    return f"tensors {u['name']} and {t['name']} share allocation {k} but are both live at step {first}"
            live.append(t)
    by_id = {t["id"]: t for t in tensors}
    for i, (bound, written) in enumerate(step_writes(program, span)):
        for w in written:
            for u in bound:
                tw, tu = by_id.get(w), by_id.get(u)
                if u != w and tw and tu and tw.get("image") and tu.get("image") and tw["storage"] == tu["storage"]:
                    return f"step {i} writes {tw['name']} and binds {tu['name']} in one image (allocation {tw['storage']})"
    return None
