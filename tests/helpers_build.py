"""Helpers for tests that compile with the full pipeline and a real OpenCL compiler."""

import os
import re

import pytest
from typing import Dict, List, Tuple

from tvm import relax

import relax_vk
from helpers import opencl_build_program as build_program


def build_and_compile(mod, **kw):
    """``relax_vk.build`` + ``clBuildProgram`` on pocl of the whole program; every kernel TVM
    generated must be in the built program."""
    compiled = relax_vk.build(mod, **kw)
    built = build_program(compiled.opencl_source)
    assert compiled.kernels, "no kernels generated"
    assert sorted(built) == sorted(compiled.kernels)
    return compiled


# (backend, the CPU device its tests run on): pocl for OpenCL, lavapipe for Vulkan
BACKENDS = [pytest.param("opencl", "pocl", id="opencl"), pytest.param("vulkan", "lavapipe", id="vulkan")]

#: set to 1 for the full matrices (``make test-full``): every ``one_api`` test on both APIs
#: (tests/conftest.py), every zoo model (tests/zoo/test_zoo_models.py)
FULL_ENV = "RELAX_VK_TEST_FULL"
FULL = os.environ.get(FULL_ENV) == "1"


def marked_full_only(values, full_only, why: str) -> list:
    """``values`` as parameters, those in ``full_only`` marked ``full_only(why)`` (run by
    ``make test-full`` only: tests/conftest.py)."""
    return [pytest.param(v, marks=pytest.mark.full_only(why)) if v in full_only else v for v in values]


def build_for(mod, backend: str):
    """``relax_vk.build`` for a backend; OpenCL builds are also compiled by pocl
    (:func:`build_and_compile`), Vulkan shaders are created by the driver when a session loads."""
    return build_and_compile(mod) if backend == "opencl" else relax_vk.build(mod, target=backend)


def kernel_scopes(compiled) -> Dict[str, Tuple[List[str], List[str]]]:
    """{kernel PrimFunc name: ([argument scopes], [output scopes])} for every call_tir of main,
    read from the call sites and checked against the PrimFunc's own buffer scopes."""
    mod = compiled.lowered
    rows = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if not (isinstance(v, relax.Call) and hasattr(v.op, "name") and v.op.name == "relax.call_tir"):
                continue
            args = [a for a in v.args[1].fields if isinstance(a.ty, relax.TensorType)]
            out = v.ty_args[0]
            outs = list(out.fields) if isinstance(out, relax.TupleType) else [out]
            scope = lambda t: str(t.vdevice.memory_scope) if t.vdevice is not None else "global"  # noqa: E731
            arg_scopes, out_scopes = [scope(a.ty) for a in args], [scope(t) for t in outs]
            func = mod[v.args[0]]
            buffers = [str(p.ty.storage_scope) or "global" for p in func.params][: len(arg_scopes) + len(out_scopes)]
            assert buffers == arg_scopes + out_scopes, f"{v.args[0].name_hint}: buffers {buffers} vs call {arg_scopes + out_scopes}"
            rows[v.args[0].name_hint] = (arg_scopes, out_scopes)
    return rows


def image_params(source: str, kernel: str) -> List[str]:
    """Access qualifiers of the image parameters of ``kernel`` in the OpenCL source."""
    m = re.search(r"__kernel\s+void\s+" + re.escape(kernel) + r"\s*\(([^)]*)\)\s*\{", source)
    assert m, f"kernel {kernel} not defined"
    return re.findall(r"(__read_only|__write_only)\s+image2d_array_t", m.group(1))
