"""Tensor lifetimes: the input of storage planning (:mod:`relax_vk.storage.planner`).

A :class:`Lifetime` is one tensor that storage planning may place in a shared allocation: the
first and last step that touch it (both inclusive: a kernel never writes its output over one of
its own inputs, so a tensor read by step ``s`` and one written by step ``s`` are both live at
``s``), its size in bytes and, for a texture, its image extents, texel dtype and whether it is *placed*
(its kernels address it at an origin of a shared image: :mod:`relax_vk.storage.rectangles`). Two lifetimes
*overlap* when their step ranges intersect; only tensors whose lifetimes do not overlap may share.

Its *pool* says what it can share with: buffers share with any buffer (bytes are bytes), textures
only with textures of the same texel format (an ``rgba32float`` image cannot hold ``rgba16float``
texels). :func:`program_lifetimes` reads them off an artifact's program (intermediates and kernel
workspaces; model inputs, outputs and constants never share); :func:`lower_bound` is the largest
total of simultaneously live bytes, which no assignment can beat. Standard library only (the
runtime validates assignments with it, without TVM).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

#: tensor kinds of an artifact's program that storage planning may share
SHAREABLE_KINDS = ("intermediate", "workspace")
#: bytes of one texel channel of each texel dtype (``snorm8``: signed normalized bytes, quantized weights)
TEXEL_ITEMSIZE = {"float32": 4, "float16": 2, "snorm8": 1}
#: the largest magnitude of a signed normalized byte: an ``snorm8`` texel reads as ``byte / SNORM8_MAX``
SNORM8_MAX = 127


@dataclass(frozen=True)
class Lifetime:
    """One shareable tensor: ``[first, last]`` steps (inclusive), its bytes and, for a texture,
    its image ``(width, height, layers)`` and texel dtype."""

    tensor: int
    name: str
    first: int
    last: int
    bytes: int
    image: Optional[Tuple[int, int, int]] = None
    dtype: str = "float32"
    placed: bool = False  # a texture its kernels address at an origin (storage.rectangles may place it)
    partners: frozenset = frozenset()  # the tensors some step binds with it, one of the two written (never in one image with it)

    def __post_init__(self) -> None:
        if self.first > self.last:
            raise ValueError(f"lifetime of {self.name}: first step {self.first} after last step {self.last}")
        if self.image is not None and image_bytes(self.image, self.dtype) != self.bytes:
            raise ValueError(f"lifetime of {self.name}: image {self.image} of {self.dtype} is not {self.bytes} bytes")

    @property
    def pool(self) -> str:
        """What it may share with: ``"buffer"`` or ``"texture:<dtype>"``."""
        return "buffer" if self.image is None else f"texture:{self.dtype}"

    def overlaps(self, other: "Lifetime") -> bool:
        return not (self.last < other.first or other.last < self.first)


def image_bytes(image: Sequence[int], dtype: str) -> int:
    """Bytes of an RGBA image of ``(width, height, layers)`` texels of ``dtype``."""
    if dtype not in TEXEL_ITEMSIZE:
        raise ValueError(f"textures hold {', '.join(TEXEL_ITEMSIZE)} texels, not {dtype}")
    return math.prod(int(v) for v in image) * 4 * TEXEL_ITEMSIZE[dtype]


def snorm8_values(array: np.ndarray) -> Optional[np.ndarray]:
    """The int8 bytes ``k`` of a float32 constant whose every value is ``k / 127`` (``|k| <= 127``),
    else None: such a texture is stored in ``snorm8`` texels (OpenCL ``CL_SNORM_INT8``, Vulkan
    ``rgba8snorm``), whose reads return ``k / 127`` (what
    :mod:`relax_vk.passes.scope.quantized_weight_texels` makes of int8 conv weights)."""
    if array.dtype != np.float32 or not array.size:
        return None
    k = np.rint(array * np.float32(SNORM8_MAX))
    if np.abs(k).max() > SNORM8_MAX or not np.array_equal(k.astype(np.float32) / np.float32(SNORM8_MAX), array):
        return None
    return k.astype(np.int8)


def half_texels(dtype: str, texel: str) -> bool:
    """Whether a texture of ``dtype`` is stored in half texels when textures hold ``texel``
    (``ScopeOptions(precision="fp16")``: float32 tensors; float16 ones hold half texels anyway)."""
    return texel == "float16" and dtype == "float32"


def past_half(values: np.ndarray) -> bool:
    """Whether a float constant holds a finite value that a half texel cannot (past 65504: it
    would be read back as infinity), so that its texture keeps float32 texels under half storage."""
    values = np.asarray(values)
    if values.dtype.kind != "f" or values.size == 0:
        return False
    finite = values[np.isfinite(values)]
    return bool(finite.size) and float(np.abs(finite).max()) > float(np.finfo(np.float16).max)


def texel_dtype(t: dict) -> str:
    """What a program tensor's texels are stored as: its ``texel`` (half storage of a float32
    tensor, ``ScopeOptions(precision="fp16")``; ``snorm8`` bytes of a quantized weight) or its dtype."""
    return t.get("texel") or t["dtype"]


def stored_bytes(t: dict) -> int:
    """Bytes a program tensor takes on the device (a half-texel image: half its float32 bytes)."""
    return image_bytes(t["image"], texel_dtype(t)) if t.get("image") else int(t["bytes"])


def step_tensors(step: dict) -> List[int]:
    """The tensor ids one program step touches (reads or writes)."""
    if step["op"] == "launch":
        return list(step["args"])
    if step["op"] == "copy":
        return [step["src"], step["dst"]]
    raise ValueError(f"unknown step {step['op']!r}")


def touched_steps(program: dict) -> Dict[int, Tuple[int, int]]:
    """``tensor id -> (first step, last step)`` for every tensor some step touches."""
    span: Dict[int, Tuple[int, int]] = {}
    for i, step in enumerate(program["steps"]):
        for tid in step_tensors(step):
            first, _ = span.get(tid, (i, i))
            span[tid] = (first, i)
    return span


def partners_of(steps: Iterable[Tuple[Sequence[int], Collection[int]]]) -> Dict[int, FrozenSet[int]]:
    """``tensor id -> the tensors it never shares an image with``, from ``steps``: ``(the tensors a
    step binds, those of them it writes)``. Two tensors one step binds are partners when the step
    writes either: a kernel cannot read and write one image (OpenCL leaves it undefined, WebGPU
    refuses a texture bound for storage and for reading in one dispatch). Two tensors a step only
    reads may share an image: OpenCL lets one image be several ``read_only`` arguments, WebGPU one
    texture be several sampled bindings (a projection conv's input and the residual it adds)."""
    partners: Dict[int, set] = {}
    for bound, written in steps:
        for tid in bound:
            mine = partners.setdefault(tid, set())
            mine.update(u for u in bound if u != tid and (tid in written or u in written))
    return {tid: frozenset(others) for tid, others in partners.items()}


def step_writes(program: dict, span: Optional[Dict[int, Tuple[int, int]]] = None) -> List[Tuple[List[int], Set[int]]]:
    """``(the tensors a step binds, those it writes)`` per step of ``program``: a step writes the
    tensors it touches first that are not model inputs or constants (every intermediate, workspace
    and output is written by the first step that touches it, its producer). ``span``: the
    program's :func:`touched_steps`, when the caller has it."""
    span = touched_steps(program) if span is None else span
    kinds = {t["id"]: t["kind"] for t in program["tensors"]}
    inputs = set(program["inputs"])
    out = []
    for i, step in enumerate(program["steps"]):
        bound = step_tensors(step)
        out.append((bound, {t for t in bound if span[t][0] == i and t not in inputs and kinds.get(t) != "constant"}))
    return out


def program_lifetimes(program: dict) -> List[Lifetime]:
    """The lifetimes of the shareable tensors of an artifact's program: intermediates and
    workspaces that are not model outputs (a tensor no step touches has none)."""
    span = touched_steps(program)
    outputs = set(program["outputs"])
    fixed = set()  # folded textures some launch binds without passing their origin: they stay at (0, 0)
    for step in program["steps"]:
        if step["op"] == "launch":
            given = {sc["origin"] for sc in step.get("scalars", []) if "origin" in sc}
            fixed.update(tid for tid in step["args"] if tid not in given)
    partners = partners_of(step_writes(program, span))
    out = []
    for t in program["tensors"]:
        if t["kind"] not in SHAREABLE_KINDS or t["id"] in outputs or t["id"] not in span:
            continue
        first, last = span[t["id"]]
        image = tuple(t["image"]) if t.get("image") else None
        out.append(Lifetime(t["id"], t["name"], first, last, stored_bytes(t), image, texel_dtype(t), "origin" in t and t["id"] not in fixed,
                            partners.get(t["id"], frozenset())))
    return out


def lower_bound(lifetimes: Sequence[Lifetime]) -> int:
    """The largest total of bytes live at one step: no assignment of these tensors uses less."""
    if not lifetimes:
        return 0
    events: Dict[int, int] = {}
    for lt in lifetimes:
        events[lt.first] = events.get(lt.first, 0) + lt.bytes
        events[lt.last + 1] = events.get(lt.last + 1, 0) - lt.bytes
    live = best = 0
    for step in sorted(events):
        live += events[step]
        best = max(best, live)
    return best


# --------------------------------------------------------------------------- placement orders
# The orders in which the strategies (shared objects and arena offsets alike) place tensors.


def by_size(lifetimes: Sequence[Lifetime]) -> List[Lifetime]:
    """Largest first (earlier, then lower id, among equals)."""
    return sorted(lifetimes, key=lambda t: (-t.bytes, t.first, t.tensor))


def by_breadth(lifetimes: Sequence[Lifetime]) -> List[Lifetime]:
    """The steps with the most live bytes first; at each, its tensors not yet listed, largest first."""
    live: Dict[int, List[Lifetime]] = {}
    for lt in lifetimes:
        for s in range(lt.first, lt.last + 1):
            live.setdefault(s, []).append(lt)
    breadth = {s: sum(t.bytes for t in ts) for s, ts in live.items()}
    order, seen = [], set()
    for s in sorted(live, key=lambda s: (-breadth[s], s)):
        for lt in by_size(live[s]):
            if lt.tensor not in seen:
                seen.add(lt.tensor)
                order.append(lt)
    return order


def in_order(lifetimes: Sequence[Lifetime]) -> List[Lifetime]:
    """Execution order (the larger first among tensors born at the same step)."""
    return sorted(lifetimes, key=lambda t: (t.first, -t.bytes, t.tensor))
