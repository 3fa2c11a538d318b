"""DeriveIdentifiers: every name that can reach generated code is a valid, unique identifier.

Requires: nothing. Runs first in the layout stage, before any op is legalized (legalization turns
variable names into kernel parameter names).

Guarantees: every variable of every Relax function (parameters and bindings) is renamed to
:func:`derive_identifier` of its name: ASCII letters, digits and ``_`` only, not starting with a
digit, not a keyword or reserved word of C, OpenCL C or WGSL, and unique within the function (a
name that collides after cleaning gets a numeric suffix). TVM turns these names into kernel
parameter names (``gpu_0/data_0`` would become an OpenCL parameter ``gpu_0/data_0_ptr``, which no
compiler accepts). Each function records ``relax_vk.source_names`` (derived -> original, for the
names that changed), so plans, artifacts and error messages show the model's names.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Dict, Set

import tvm
from tvm import relax

SOURCE_NAMES_ATTR = "relax_vk.source_names"

#: C / OpenCL C keywords and types, WGSL keywords and reserved words, and the names relax_vk's
#: WGSL emitter and TVM's OpenCL codegen use themselves
RESERVED = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if inline int long register
    restrict return short signed sizeof static struct switch typedef union unsigned void volatile while bool half
    kernel __kernel global __global local __local constant __constant private __private read_only write_only
    read_write image2d_t image2d_array_t image3d_t sampler_t event_t size_t ptrdiff_t intptr_t uintptr_t uchar ushort uint
    ulong float2 float3 float4 float8 float16 int2 int3 int4 half4 char4 uchar4 true false NULL alias array atomic
    discard enable fn let loop mat2x2 mat3x3 mat4x4 override ptr requires sampler texture_2d texture_2d_array
    texture_storage_2d_array u32 i32 f32 f16 var vec2 vec3 vec4 workgroup storage uniform function private
    continuing diagnostic elseif fallthrough main image_sampler""".split()
)


def derive_identifier(name: str, taken: Set[str]) -> str:
    """A valid identifier made from ``name``, not in ``taken`` (which it is added to)."""
    ascii_name = unicodedata.normalize("NFKD", str(name)).encode("ascii", "ignore").decode()
    base = re.sub(r"[^A-Za-z0-9_]", "_", ascii_name)
    base = re.sub(r"_+", "_", base).strip("_") or "v"
    if base[0].isdigit():
        base = "v_" + base
    if base in RESERVED or base.startswith("__"):
        base = base + "_"
    candidate, k = base, 1
    while candidate in taken:
        candidate, k = f"{base}_{k}", k + 1
    taken.add(candidate)
    return candidate


@relax.expr_functor.mutator
class _Renamer(relax.PyExprMutator):
    def __init__(self, mod, taken: Set[str], source: Dict[str, str]):
        super().__init__(mod)
        self.taken = taken
        self.source = source

    def _rename(self, var):
        new_name = derive_identifier(var.name, self.taken)
        if new_name != var.name:
            self.source[new_name] = self.source.get(var.name, var.name)
        cls = relax.DataflowVar if isinstance(var, relax.DataflowVar) else relax.Var
        return cls(new_name, var.ty)

    def visit_var_binding_(self, binding):
        value = self.visit_expr(binding.value)
        new_var = self._rename(binding.var)
        self.builder_.emit_normalized(relax.VarBinding(new_var, value))
        self.set_var_remap(binding.var, new_var)

    def visit_match_cast_(self, binding):
        value = self.visit_expr(binding.value)
        new_var = self._rename(binding.var)
        self.builder_.emit_normalized(relax.MatchCast(new_var, value, binding.ty))
        self.set_var_remap(binding.var, new_var)


def _derive(func: relax.Function, mod: tvm.IRModule) -> relax.Function:
    taken: Set[str] = set()
    source: Dict[str, str] = dict(func.attrs[SOURCE_NAMES_ATTR]) if func.attrs is not None and SOURCE_NAMES_ATTR in func.attrs else {}
    renamer = _Renamer(mod, taken, source)
    params = [renamer._rename(p) for p in func.params]
    bound = func.bind_params(dict(zip(func.params, params))) if params else func
    body = renamer.visit_expr(bound.body)
    out = relax.Function(params, body, None, func.is_pure, func.attrs, func.span)
    return out.with_attr(SOURCE_NAMES_ATTR, source) if source else out


def DeriveIdentifiers() -> tvm.transform.Pass:
    """Rename every Relax variable to a valid unique identifier (see the module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        return _derive(func, mod)

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.DeriveIdentifiers")


def source_name(func, name: str) -> str:
    """The model's own name for a (derived) variable name of ``func``."""
    if func is not None and func.attrs is not None and SOURCE_NAMES_ATTR in func.attrs:
        return str(func.attrs[SOURCE_NAMES_ATTR].get(name, name))
    return name
