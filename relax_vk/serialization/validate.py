"""Complete validation of an artifact's program, before anything is allocated or run.

The file format (:mod:`.artifact`) guarantees the bytes are what was written (CRCs); this checks
that what was written is a program the runtimes can execute: every tensor well formed (shape,
dtype, scope, image extents that match the scope's flattening, byte count), every kernel's launch
geometry, every step's references (kernels that exist, tensor ids in range, copies between tensors
of equal size), inputs and outputs, every constant present with its shape and dtype, and every
kernel present in the source (an OpenCL ``__kernel`` of that name, a Vulkan shader span inside the
source, and for OpenCL each launch's tensors of the kinds its kernel's parameters take), and the storage assignment safe (:func:`relax_vk.storage.program.storage_problem`: no two
tensors of one allocation live at once, each fits its allocation). The first problem is returned
naming the entry (:func:`first_problem`; the artifact raises it as an
:class:`~relax_vk.serialization.artifact.ArtifactError`). Standard library and numpy only (the
runtime calls it without TVM).
"""

from __future__ import annotations

import math
import re
from typing import Dict, Optional

import numpy as np

from ..core.scope import ALL_SCOPES, scope_from_name
from ..storage.program import storage_problem

KINDS = ("input", "intermediate", "constant", "workspace")
TARGETS = ("opencl", "vulkan")
STEPS = ("launch", "copy")


class _Invalid(Exception):
    pass


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise _Invalid(message)


def _ints(value, n=None, positive=True) -> bool:
    if not isinstance(value, list) or (n is not None and len(value) != n):
        return False
    return all(isinstance(v, int) and not isinstance(v, bool) and (v > 0 if positive else v >= 0) for v in value)


def _dtype(name) -> np.dtype:
    try:
        return np.dtype(str(name))
    except TypeError:
        raise _Invalid(f"unknown dtype {name!r}") from None


def _tensor(t: dict, index: int) -> None:
    where = f"tensor {index}"
    _require(isinstance(t, dict), f"{where} is not an object")
    _require(t.get("id") == index, f"{where} has id {t.get('id')!r}")
    _require(isinstance(t.get("name"), str), f"{where} has no name")
    where = f"tensor {index} ({t['name']})"
    # a buffer may hold no elements (a slice that leaves nothing), a texture may not
    _require(_ints(t.get("shape"), positive=False), f"{where}: shape {t.get('shape')!r} is not a list of non-negative integers")
    dtype = _dtype(t.get("dtype"))
    _require(t.get("kind") in KINDS, f"{where}: kind {t.get('kind')!r} is not one of {KINDS}")
    _require(t.get("scope") in {s.name for s in ALL_SCOPES}, f"{where}: unknown scope {t.get('scope')!r}")
    expected = math.prod(t["shape"]) * dtype.itemsize
    _require(t.get("bytes") == expected, f"{where}: {t.get('bytes')!r} bytes for shape {t['shape']} {dtype} ({expected} expected)")
    scope = scope_from_name(t["scope"])
    if scope.is_texture:
        _require(_ints(t["shape"]), f"{where}: a texture of shape {t['shape']} (no elements)")
        image = scope.image_extents(t["shape"]).as_tuple() if t["shape"][-1] == 4 and len(t["shape"]) >= 3 else None
        _require(image is not None and t.get("image") == list(image), f"{where}: image {t.get('image')!r} does not match {t['scope']} of {t['shape']}")
        _require(str(dtype) in ("float32", "float16"), f"{where}: a {dtype} texture")
    else:
        _require(t.get("image") is None, f"{where}: a buffer with image extents {t.get('image')!r}")
    if "host_dtype" in t:
        _dtype(t["host_dtype"])
    if "texel" in t:
        _require(scope.is_texture and t["texel"] in ("float32", "float16"), f"{where}: texel {t['texel']!r} (half or float texels of a texture only)")


def _kernel(k: dict, target: str, source: str) -> None:
    _require(isinstance(k, dict) and isinstance(k.get("name"), str), f"kernel entry {k!r} has no name")
    where = f"kernel {k['name']}"
    _require(_ints(k.get("global"), 3) and _ints(k.get("local"), 3), f"{where}: launch geometry global={k.get('global')!r} local={k.get('local')!r}")
    _require(all(g % loc == 0 for g, loc in zip(k["global"], k["local"])), f"{where}: global size {k['global']} is not a multiple of the local size {k['local']}")
    if target == "vulkan":
        span = k.get("shader") or {}
        start, length = span.get("offset"), span.get("length")
        _require(isinstance(start, int) and isinstance(length, int) and 0 <= start and start + length <= len(source) and length > 0,
                 f"{where}: shader span {span!r} lies outside the source section ({len(source)} characters)")  # fmt: skip
        _require(isinstance(k.get("bindings"), list), f"{where}: no binding list")
    else:
        _require(re.search(_KERNEL_HEAD.format(re.escape(k["name"])), source) is not None,
                 f"{where} is not in the OpenCL source")  # fmt: skip


def validate_program(program: dict, source: str, constants: Dict[str, np.ndarray]) -> None:
    """Raise ``_Invalid`` (see :func:`check`) for the first problem of ``program``."""
    _require(isinstance(program, dict), "the program is not an object")
    _require(program.get("format") == "relax_vk.program", f"format {program.get('format')!r}, expected 'relax_vk.program'")
    target = program.get("target")
    _require(target in TARGETS, f"target {target!r} is not one of {TARGETS}")
    tensors = program.get("tensors")
    _require(isinstance(tensors, list), "no tensor list")
    for i, t in enumerate(tensors):
        _tensor(t, i)
    kernels = program.get("kernels")
    _require(isinstance(kernels, list), "no kernel list")
    names = set()
    for k in kernels:
        _kernel(k, target, source)
        _require(k["name"] not in names, f"kernel {k['name']} is listed twice")
        names.add(k["name"])
    n = len(tensors)

    def ref(tid, what):
        _require(isinstance(tid, int) and not isinstance(tid, bool) and 0 <= tid < n, f"{what} names tensor {tid!r}, which does not exist ({n} tensors)")
        return tensors[tid]

    steps = program.get("steps")
    _require(isinstance(steps, list), "no step list")
    for i, step in enumerate(steps):
        _require(isinstance(step, dict) and step.get("op") in STEPS, f"step {i}: op {step.get('op') if isinstance(step, dict) else step!r} is not one of {STEPS}")
        if step["op"] == "launch":
            _require(step.get("kernel") in names, f"step {i} launches kernel {step.get('kernel')!r}, which the program does not have")
            _require(isinstance(step.get("args"), list), f"step {i} ({step['kernel']}) has no argument list")
            for tid in step["args"]:
                ref(tid, f"step {i} ({step['kernel']})")
        else:
            src, dst = ref(step.get("src"), f"copy step {i}"), ref(step.get("dst"), f"copy step {i}")
            _require(src["bytes"] == dst["bytes"], f"copy step {i}: {src['name']} ({src['bytes']} bytes) -> {dst['name']} ({dst['bytes']} bytes)")
    for what in ("inputs", "outputs"):  # a model of constants alone has no inputs
        ids = program.get(what)
        _require(isinstance(ids, list) and (ids or what == "inputs"), f"no {what}")
        for tid in ids:
            ref(tid, what)
    problem = storage_problem(program)
    _require(problem is None, f"storage assignment: {problem}")
    for t in tensors:
        if t["kind"] != "constant":
            continue
        array = constants.get(f"t{t['id']}")
        _require(array is not None, f"constant tensor {t['id']} ({t['name']}) has no data")
        _require(list(array.shape) == t["shape"] and str(array.dtype) == str(_dtype(t["dtype"])),
                 f"constant {t['name']}: data {list(array.shape)} {array.dtype}, tensor {t['shape']} {t['dtype']}")  # fmt: skip


_KERNEL_HEAD = r"__kernel\s+void\s+(?:__attribute__\(\([^)]*\)\)\s+)?{}\s*\("


def kernel_param_kinds(source: str, name: str):
    """What each parameter of OpenCL kernel ``name``'s declaration takes: ``"i"`` an image,
    ``"b"`` a buffer (a pointer), ``"s"`` anything else; None when its list is not closed."""
    m = re.search(_KERNEL_HEAD.format(re.escape(name)), source)
    if m is None:
        return None
    depth, param, kinds = 1, "", []

    def classify(p: str) -> None:
        p = p.strip()
        if p and p != "void":
            kinds.append("i" if re.search(r"image[123]d", p) else "b" if "*" in p else "s")

    for c in source[m.end() :]:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                classify(param)
                return "".join(kinds)
        elif c == "," and depth == 1:
            classify(param)
            param = ""
            continue
        param += c
    return None


def check_launch_signatures(program: dict, source: str) -> None:
    """Every launch of an OpenCL program binds as many tensors as its kernel's declaration has
    parameters, an image to every image parameter and a buffer to every pointer (a buffer bound
    to an image parameter makes pocl crash inside ``clEnqueueNDRangeKernel``). The native runtime
    makes the same check, with the same messages."""
    kinds: Dict[str, str] = {}
    tensors = program["tensors"]
    for i, step in enumerate(program["steps"]):
        if step["op"] != "launch":
            continue
        kernel = step["kernel"]
        if kernel not in kinds:
            found = kernel_param_kinds(source, kernel)
            _require(found is not None, f"kernel {kernel}: its parameter list in the OpenCL source is not closed")
            kinds[kernel] = found
        want, args = kinds[kernel], step["args"]
        _require(len(args) == len(want), f"step {i} ({kernel}) passes {len(args)} tensors; the kernel takes {len(want)} parameters")
        for a, (tid, kind) in enumerate(zip(args, want)):
            t = tensors[tid]
            image = scope_from_name(t["scope"]).is_texture
            problem = ("a buffer for an image parameter" if kind == "i" and not image else "a texture for a buffer parameter" if kind == "b" and image
                       else "a tensor for a parameter that is neither a buffer nor an image" if kind == "s" else None)  # fmt: skip
            _require(problem is None, f"step {i} ({kernel}) passes tensor {t['name']} as parameter {a}: {problem}")


def first_problem(artifact) -> Optional[str]:
    """The first problem of ``artifact``'s program, naming the entry (None: it has none).
    :meth:`~relax_vk.serialization.artifact.Artifact.validate` raises it as an ``ArtifactError``
    (this module knows nothing of the container, so it does not import :mod:`.artifact`)."""
    try:
        validate_program(artifact.program, artifact.source, artifact.constants)
        if artifact.program.get("target") == "opencl":
            check_launch_signatures(artifact.program, artifact.source)
    except _Invalid as err:
        return str(err)
    return None
