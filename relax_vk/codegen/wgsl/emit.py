"""Emit a WGSL compute shader from one finalized TVM device kernel (after ``TextureFlatten``,
``RepairTextureStores`` and ``LowerIntrin``).

Contract
--------
Requires a device ``PrimFunc`` whose parameters are pointers (buffers or textures) or int32/int64
scalars (the run-time sizes of :mod:`relax_vk.codegen.run_time_shapes`), whose ``threadIdx``
extents are constants (``blockIdx`` extents may be symbolic: the workgroup counts come from the
dispatch, which the runtime computes per run from the launch step's ``"global"``), and whose
texture accesses are ``tirx.texture2d_load`` / ``tirx.texture2d_store`` of whole RGBA texels
(float32, or float16 with the device's ``shader-f16``), or single lanes of a loaded texel.
Guarantees a self-contained WGSL module with one entry point ``main`` and these bindings, all in
group 0, binding ``i`` = parameter ``i``:

* a texture the kernel only reads: ``texture_2d_array<f32>``, read with ``textureLoad``;
* a texture the kernel writes: ``texture_storage_2d_array<rgba32float, write>`` (``rgba16float``
  for float16), written with ``textureStore`` (a kernel that reads and writes one texture is
  refused);
* a buffer: ``var<storage, read_write> array<T>`` (``"buffer"``), or ``var<storage, read>`` where the
  kernel never writes it (``"buffer_read"``). A bool, int8 or uint8 buffer (WGSL storage has no
  8-bit type) is ``array<u32>`` holding the tensor's bytes as they are, four to a word: a load
  extracts its byte (``(word >> 8*(i%4)) & 0xff``, sign-extended for int8), a store clears and sets
  its byte with ``atomicAnd`` / ``atomicOr`` (the array is then ``array<atomic<u32>>``). So int8
  weights stay one byte an element on Vulkan. 8- and 16-bit integer values compute in ``i32`` /
  ``u32``; a cast to them wraps to their width. int16/uint16 buffers are refused. An int64 or
  uint64 buffer (a tensor between kernels: a cumsum of a mask, positions from it) is
  ``array<vec2<i32>>`` (``vec2<u32>``), eight bytes an element as the artifact lays it out: a load
  reads the low word, a store writes the value and its sign (zero) extension. Its values are held in
  32 bits, as the kernels compute them (below), and the host never reads one (the edges convert
  64-bit inputs and outputs);
* the integer scalars, all of them together: one ``var<uniform> rvk_args: array<vec4<i32>, M>``
  (``"uniforms"``, the kernel's last binding), the ``k``-th scalar parameter (in parameter order)
  as an ``i32`` (int64 too: see below) in word ``k`` (``rvk_args[k / 4][k % 4]``), each read once
  into a ``let`` at the top of ``main``. One binding whatever the count, as ncnn passes a shader's
  sizes in one push-constant block: a uniform binding each took up to 9 of the 12 uniform buffers
  a WebGPU stage may bind by default (a conv over three run-time dims). The runtime writes the
  block when the run's sizes change (a launch step's ``"scalars"``, in the order of their
  ``index``). The tensors take bindings 0, 1, ... in parameter order.

``blockIdx.{x,y,z}`` become ``workgroup_id`` and ``threadIdx.{x,y,z}`` ``local_invocation_id``
(all three axes: TVM's WebGPU codegen refuses ``blockIdx.z``). WGSL has no 64-bit integers:
``int64`` index arithmetic is emitted as ``i32`` (the exporter refuses tensors of 2**31 elements
or more, so every index fits); Vulkan kernels' indices are narrowed to int32 before ``LowerIntrin``
(:mod:`relax_vk.codegen.index_narrowing`), so their floordiv/floormod are lowered for i32, and an
int64 constant that does not fit i32 (one an int64 lowering wrote) is refused, never wrapped. Vectors wider than WGSL's 4 lanes (float16x8 loads) are stored
lane by lane. Anything the emitter cannot translate exactly raises
:class:`WGSLEmitError` naming the kernel and the construct; it never guesses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Collection, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ...core.errors import RelaxVKError, UnsupportedError
from ...core.ir_utils import NodeDict, NodeSet
from ..run_time_shapes import substitute
from .helpers import HELPERS, MATH_FUNCTIONS, helper_closure

TEXTURE_PREFIX = "global.texture"
# TIR binary expressions that are WGSL infix operators with the same meaning (integer Div and Mod
# truncate in both; shift amounts need u32 and are handled apart)
_BINARY_OPS = {
    "Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%",
    "EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=",
    "BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^",
}  # fmt: skip
_SHIFT_OPS = {"LShift": "<<", "RShift": ">>"}  # WGSL shifts take a u32 amount
_UNARY_OPS = {"Not": "!", "BitwiseNot": "~"}
# float operators WGSL gets wrong: ``%`` is x - y trunc(x/y) (inexact, NaN for an infinite y), and
# ``!=`` may be ordered on a driver that assumes no NaN (lavapipe: NaN != 1 is false); Mod calls
# C's exact fmod, NE is written !(a == b)
_FLOAT_OPS = {"Mod": "rvk_fmod", "NE": None}
# the same operators written as intrinsic calls
_CALL_OPS = {
    "shift_left": "LShift", "shift_right": "RShift", "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr",
    "bitwise_xor": "BitwiseXor", "bitwise_not": "BitwiseNot",
}  # fmt: skip
_AXES = "xyz"
# node type -> the _Emitter function that translates it (filled as the types are met)
_EXPR_HANDLERS: Dict[type, Callable] = {}
_STMT_HANDLERS: Dict[type, Callable] = {}

# WGSL keywords and reserved words an identifier must not take (WGSL spec, section 15).
_RESERVED = set(
    """alias break case const const_assert continue continuing default diagnostic discard else enable
    false fn for if let loop override requires return struct switch true var while NULL Self abstract
    active alignas alignof as asm asm_fragment async attribute auto await become binding_array cast
    catch class co_await co_return co_yield coherent column_major common compile compile_fragment
    concept const_cast consteval constexpr constinit crate debugger decltype delete demote
    demote_to_helper do dynamic_cast enum explicit export extends extern external fallthrough filter
    final finally friend from fxgroup get goto groupshared highp impl implements import inline
    instanceof interface layout lowp macro macro_rules match mediump meta mod module move mut
    mutable namespace new nil noexcept noinline nointerpolation noperspective null nullptr of
    operator package packoffset partition pass patch pixelfragment precise precision premerge priv
    protected pub public readonly ref regardless register reinterpret_cast require resource restrict
    self set shared sizeof smooth snorm static static_assert static_cast std subroutine super target
    template this thread_local throw trait try type typedef typeid typename typeof union unless
    unorm unsafe unsized use using varying virtual volatile wgsl where with writeonly yield
    array atomic bool f16 f32 i32 u32 mat2x2 mat2x3 mat2x4 mat3x2 mat3x3 mat3x4 mat4x2 mat4x3 mat4x4
    ptr sampler sampler_comparison texture_1d texture_2d texture_2d_array texture_3d texture_cube
    texture_cube_array vec2 vec3 vec4 main select min max abs exp exp2 log log2 sqrt inverseSqrt floor
    ceil round trunc sign sin cos tan asin acos atan atan2 sinh cosh tanh pow fma textureLoad
    textureStore bitcast workgroupBarrier""".split()
)


class WGSLEmitError(RelaxVKError, ValueError):
    """A device kernel uses something the WGSL emitter cannot translate exactly."""


@dataclass(frozen=True)
class Shader:
    """One kernel as a WGSL module: its source, workgroup size and the kind of each binding
    (``"buffer"``, ``"buffer_read"`` (never written), ``"texture"`` (sampled, read),
    ``"storage_texture"`` / ``"storage_texture_f16"`` (written, rgba32float / rgba16float),
    ``"uniforms"`` (the kernel's integer scalar parameters, one ``i32`` word each in parameter
    order, the last binding)), and its ``var<workgroup>`` bytes."""

    name: str
    source: str
    workgroup: Tuple[int, int, int]
    bindings: Tuple[str, ...]
    workgroup_bytes: int = 0
    #: the iterations one invocation runs of all its loops together, at most (None: a loop's trip
    #: count is a run-time size): what llvmpipe (lavapipe) caps, :func:`loop_iterations`
    loop_iterations: Optional[int] = 0
    #: where that count is a run-time size: it as an expression of the kernel's integer parameters
    #: (``loop_params``, the kernel's parameters in order), which the export bounds over the dims'
    #: ranges at each launch; None where it is not known
    loop_bound: Optional[object] = None
    loop_params: Tuple[object, ...] = ()


def _dtype(expr_or_dtype):
    if hasattr(expr_or_dtype, "ty"):
        ty = expr_or_dtype.ty
        if not hasattr(ty, "dtype"):
            raise TypeError(f"{expr_or_dtype} has no primitive type")
        return ty.dtype
    return tvm.DataType(str(expr_or_dtype)) if isinstance(expr_or_dtype, str) else expr_or_dtype


# dtype -> its WGSL type, for the dtypes that have one (a dtype without one raises, naming where)
_SCALAR_TYPES: Dict[str, str] = {}
_WGSL_TYPES: Dict[str, str] = {}


def _scalar_type(dtype, where: str) -> str:
    """The WGSL type of one lane of ``dtype``."""
    text = _SCALAR_TYPES.get(dtype)
    if text is None:
        text = _SCALAR_TYPES[str(dtype)] = _lane_type(dtype, where)
    return text


def _lane_type(dtype, where: str) -> str:
    code, bits = int(dtype.type_code), int(dtype.bits)
    if code == 2 and bits == 32:
        return "f32"
    if code == 2 and bits == 16:
        return "f16"  # needs the device's shader-f16 feature (the shader says `enable f16;`)
    if code == 0 and bits in (32, 64):
        return "i32"  # int64 indices: see the module docstring
    if code == 0 and bits in (8, 16):
        return "i32"  # (8/16-bit values compute in 32 bits; casts to them wrap: _Emitter.e_Cast)
    if code == 1 and bits in (8, 16, 32):
        return "u32"
    if (code == 1 and bits == 1) or code == 6:  # (TVM's bool: uint1, or DLPack's bool of 8 bits)
        return "bool"
    raise WGSLEmitError(f"{where}: dtype {dtype} has no WGSL type (float32, float16, 8/16/32-bit integers, int64 indices and bool only)")


def wgsl_type(dtype, where: str = "kernel") -> str:
    """The WGSL type of a TVM dtype (vectors of 2-4 lanes)."""
    text = _WGSL_TYPES.get(dtype) if isinstance(dtype, str) else None
    if text is None:
        dtype = _dtype(dtype)
        text = _WGSL_TYPES.get(dtype)
        if text is None:
            text = _WGSL_TYPES[str(dtype)] = _vector_type(dtype, where)
    return text


def _vector_type(dtype, where: str) -> str:
    base = _scalar_type(dtype, where)
    lanes = int(dtype.lanes)
    if lanes == 1:
        return base
    if lanes in (2, 3, 4):
        return f"vec{lanes}<{base}>"
    raise WGSLEmitError(f"{where}: {lanes}-lane vectors ({dtype}) have no WGSL type (2-4 lanes only)")


def _float_literal(value: float, dtype: str = "float32") -> str:
    """A WGSL literal of ``value`` rounded to ``dtype`` (``1.5f``, ``(-2.0h)``); non-finite float32
    values call the ``rvk_inf``/``rvk_nan`` helpers (WGSL has no such literals)."""
    with np.errstate(over="ignore"):  # beyond the dtype's range rounds to infinity, as intended
        rounded = float(np.float16(value) if dtype == "float16" else np.float32(value))
    if math.isnan(rounded):
        return "rvk_nan()"
    if math.isinf(rounded):
        return "rvk_inf()" if value > 0 else "(-rvk_inf())"
    text = format(abs(rounded), ".6g" if dtype == "float16" else ".9g")
    text = (text if any(c in text for c in ".e") else text + ".0") + ("h" if dtype == "float16" else "f")
    return f"(-{text})" if rounded < 0 else text


def _is_ramp_lanes(expr, base: int, lanes: int) -> bool:
    return (
        type(expr).__name__ == "Ramp"
        and isinstance(expr.base, tirx.IntImm)
        and int(expr.base.value) == base
        and isinstance(expr.stride, tirx.IntImm)
        and int(expr.stride.value) == 1
        and int(expr.lanes) == lanes
    )


#: the loop iterations llvmpipe runs per shader invocation, all loops together, before it ends them
#: (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS, "shared between every loop"): past it, lavapipe silently
#: returns what the loops had computed by then
LLVMPIPE_LOOP_ITERATIONS = 65535


def _iterations(stmt, unrolled, trips, lets: dict):
    """The loop iterations of ``stmt`` (:func:`loop_iterations`), each loop's trip count given by
    ``trips(extent, lets)`` (None: not known), ``lets`` the ``let`` bindings on the way."""
    kind = type(stmt).__name__
    if kind == "For":
        count = trips(stmt.extent, lets)
        if count is None:
            return None
        inner = _iterations(stmt.body, unrolled, trips, lets)
        if inner is None:
            return None
        return count * inner if unrolled(stmt) else count + count * inner
    if kind == "While":
        return None
    if kind == "LetStmt":
        lets = {**lets, stmt.var: substitute(stmt.value, lets)} if lets is not None else None
    parts = list(stmt.seq) if kind == "SeqStmt" else [getattr(stmt, a) for a in ("then_case", "else_case", "body") if getattr(stmt, a, None) is not None]
    total = 0
    for part in parts:
        if not isinstance(part, tirx.Stmt):
            continue
        n = _iterations(part, unrolled, trips, lets)
        if n is None:
            return None
        total = total + n
    return total


def loop_iterations(stmt, unrolled=lambda s: False) -> Optional[int]:
    """An upper bound on the iterations one invocation runs of the loops in ``stmt``, all together
    (both branches of an ``if`` counted; a loop the emitter unrolls, ``unrolled``, runs its body's
    loops once per copy); None where a trip count is not a constant."""
    return _iterations(stmt, unrolled, lambda extent, _lets: int(extent.value) if isinstance(extent, tirx.IntImm) else None, None)


def symbolic_loop_iterations(func: tirx.PrimFunc, unrolled=lambda s: False):
    """:func:`loop_iterations` of ``func``'s body where trip counts are run-time sizes: an
    expression of ``func``'s integer parameters (the ``let`` bindings on the way substituted), or
    None where a count reads anything else (a loaded value, a thread index) or a ``while`` loop."""
    params = NodeSet()
    for p in func.params:
        if not isinstance(getattr(p, "ty", None), tirx.buffer.BufferType):
            params.add(p)

    def trips(extent, lets):
        extent = substitute(extent, lets)
        if not all(v in params for v in tirx.analysis.undefined_vars(extent)):
            return None
        return tirx.Cast("int64", extent) if extent.ty.dtype != "int64" else extent

    try:
        total = _iterations(func.body, unrolled, trips, {})
    except UnsupportedError:  # (a let or extent the size arithmetic does not carry: not known)
        return None
    return tirx.const(total, "int64") if isinstance(total, int) else total


def _has_loop(stmt) -> bool:
    kind = type(stmt).__name__
    if kind in ("For", "While"):
        return True
    if kind == "SeqStmt":
        return any(_has_loop(x) for x in stmt.seq)
    if kind == "IfThenElse":
        return _has_loop(stmt.then_case) or (stmt.else_case is not None and _has_loop(stmt.else_case))
    if kind in ("AttrStmt", "LetStmt"):
        return _has_loop(stmt.body)
    return False


class _BufferFacts(NamedTuple):
    """What a load or store of one buffer needs to know about it."""

    name: str  # the identifier of its storage
    root: object  # the parameter Var or allocated Buffer it views
    byte_kind: Optional[str]  # "bool" | "int8" | "uint8" for a byte buffer (four to a u32 word), else None
    lanes: int  # lanes of its element dtype (4 for a float32x4 workspace)


class _Emitter:
    def __init__(self, func: tirx.PrimFunc, name: str):
        self.func = func
        self.kernel = name
        self.lines: List[str] = []
        self.module_vars: List[str] = []
        self.helpers: set = set()
        self.names: Dict[object, str] = NodeDict()  # Var -> identifier
        self.taken: set = set()
        self.buffers: Dict[object, str] = NodeDict()  # data Var -> identifier of its storage
        self.textures: Dict[object, set] = NodeDict()  # data Var -> {"load", "store"} uses seen
        self.roots: Dict[object, object] = NodeDict()  # Buffer -> the parameter Var or allocated Buffer it views
        self.thread_extent: Dict[str, int] = {}
        self.pending: List[str] = []
        self.stored: set = NodeSet()  # parameters (and allocations) the kernel writes
        self.byte_buffers: set = NodeSet()  # bool, int8 and uint8 parameters: bytes packed four to a u32 word
        self.wide_buffers: set = NodeSet()  # int64 and uint64 parameters: two 32-bit words an element, the low one used
        self.byte_dtype: Dict[object, str] = NodeDict()  # byte buffer -> "bool" | "int8" | "uint8"
        self.texture_dtype: Dict[object, str] = NodeDict()  # texture parameter -> "float32" | "float16"
        self.half_storage = False  # written textures hold half texels (ScopeOptions(precision="fp16"))
        self.workgroup_bytes = 0  # var<workgroup> memory (checked against the adapter at load)
        self.bindings: List[str] = []
        self.scalars: Dict[object, int] = NodeDict()  # integer scalar parameter -> its word in the uniform block
        self.args_block = ""  # the uniform block's identifier (module docstring)
        self.grid: Dict[str, object] = {}  # blockIdx tag -> its extent (an int, or a PrimExpr of the scalars)
        self.where = f"kernel {name}"  # the kernel, as errors from wgsl_type name it
        self.types: Dict[int, Tuple[object, object]] = {}  # address of a PrimType -> (that PrimType, its dtype)
        self.buffer_facts: Dict[object, _BufferFacts] = NodeDict()  # Buffer -> its facts (see facts)

    # ------------------------------------------------------------- naming
    def fail(self, what: str) -> WGSLEmitError:
        return WGSLEmitError(f"kernel {self.kernel}: {what}")

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        base = base.lstrip("_") or "v"
        name, n = base, 0
        while name in self.taken or name in _RESERVED or name.startswith("rvk_"):
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def bind(self, var, hint: Optional[str] = None) -> str:
        name = self.fresh(hint or str(var.name))
        self.names[var] = name
        return name

    def var(self, var) -> str:
        name = self.names.get(var)
        if name is None:
            raise self.fail(f"variable {var.name} is used but never defined")
        return name

    def dtype(self, e):
        """The dtype of the PrimExpr ``e``. TVM shares one PrimType node among the expressions of a
        dtype, and reading a dtype through the FFI costs several times a dict lookup, so the dtype
        is kept per type node, by the node's address (``id_``: a PrimType's hash reads its dtype),
        with the node (which keeps the address its own)."""
        ty = e.ty
        hit = self.types.get(ty.id_)
        if hit is None:
            hit = self.types[ty.id_] = (ty, _dtype(e))
        return hit[1]

    def emit(self, depth: int, text: str) -> None:
        # let-expressions met while building ``text`` become let statements just before it (they
        # are pure, so evaluating them first is exact; WGSL has no let-expressions)
        pending, self.pending = self.pending, []
        for line in pending:
            self.lines.append("    " * depth + line)
        self.lines.append("    " * depth + text)

    # -------------------------------------------------------- parameters
    def params(self) -> None:
        """Name every parameter; buffers are declared here, textures after the body (whether a
        texture is sampled or a storage texture depends on how the body uses it)."""
        for param in self.func.params:
            ty = param.ty
            if not isinstance(ty, tvm.ir.PointerType):
                dtype = str(getattr(ty, "dtype", ty))
                if dtype not in ("int32", "int64"):
                    raise self.fail(f"parameter {param.name} is a {dtype} scalar; kernels take buffers, textures and int32/int64 sizes only")
                # a run-time size: a word of the uniform block holding it as i32 (int64 too: module
                # docstring), read into a let of the parameter's name at the top of main (see run)
                self.bind(param)
                self.scalars[param] = len(self.scalars)
                continue
            scope = str(ty.storage_scope) or "global"
            self.bind(param)
            if scope.startswith(TEXTURE_PREFIX):
                elem = str(ty.element_type.dtype)
                if elem not in ("float32", "float16"):
                    raise self.fail(f"texture parameter {param.name} holds {elem}; textures are RGBA float32 or float16")
                self.textures[param] = set()
                self.texture_dtype[param] = elem
            elif scope == "global" and str(ty.element_type.dtype) in ("bool", "int8", "uint8"):
                # one byte per flag or 8-bit value, four to a u32 word (WGSL storage holds no bool
                # or 8-bit type): the artifact's bytes as they are, read by byte extraction
                self.byte_buffers.add(param)
                self.byte_dtype[param] = str(ty.element_type.dtype)
                self.buffers[param] = self.names[param]
            elif scope == "global":
                dtype = str(ty.element_type.dtype)
                elem = wgsl_type(dtype, f"kernel {self.kernel}: buffer {param.name}")
                if dtype in ("int64", "uint64"):
                    self.wide_buffers.add(param)
                elif elem == "bool" or dtype.startswith(("int64", "uint64", "int16", "uint16")):
                    raise self.fail(f"buffer {param.name} holds {dtype}; WGSL storage buffers hold 32-bit values (and 8-bit ones as bytes of words) only")
                self.buffers[param] = self.names[param]
            else:
                raise self.fail(f"parameter {param.name} has memory scope {scope!r}; kernels take global buffers and textures")

    def declare_params(self) -> List[str]:
        decls = []
        tensors = [p for p in self.func.params if p not in self.scalars]
        for index, param in enumerate(tensors):
            name = self.names[param]
            if param in self.textures:
                uses = self.textures[param]
                if uses == {"load", "store"}:
                    raise self.fail(f"texture {param.name} is read and written by one kernel (write-only storage textures)")
                if "store" in uses and (self.texture_dtype[param] == "float16" or self.half_storage):
                    # (a float32 texture stored as half texels: textureStore takes vec4<f32> for both)
                    kind, decl = "storage_texture_f16", "texture_storage_2d_array<rgba16float, write>"
                elif "store" in uses:
                    kind, decl = "storage_texture", "texture_storage_2d_array<rgba32float, write>"
                else:
                    kind, decl = "texture", "texture_2d_array<f32>"
                decls.append(f"@group(0) @binding({index}) var {name}: {decl};")
            elif param in self.byte_buffers:
                # written flags: atomic words (each thread clears and sets only its own byte)
                kind, decl = ("buffer", "var<storage, read_write>") if param in self.stored else ("buffer_read", "var<storage, read>")
                elem = "atomic<u32>" if param in self.stored else "u32"
                decls.append(f"@group(0) @binding({index}) {decl} {name}: array<{elem}>;")
            else:
                elem = wgsl_type(str(param.ty.element_type.dtype))
                if param in self.wide_buffers:  # (eight bytes an element: module docstring)
                    elem = f"vec2<{elem}>"
                # a buffer the kernel never writes is bound read-only: the driver may then read it
                # through its read-only (texture/constant) cache
                kind, access = ("buffer", "read_write") if param in self.stored else ("buffer_read", "read")
                decls.append(f"@group(0) @binding({index}) var<storage, {access}> {name}: array<{elem}>;")
            self.bindings.append(kind)
        if self.scalars:
            words = -(-len(self.scalars) // 4)
            decls.append(f"@group(0) @binding({len(tensors)}) var<uniform> {self.args_block}: array<vec4<i32>, {words}>;")
            self.bindings.append("uniforms")
        return decls

    # -------------------------------------------------------- expressions
    def expr(self, e) -> str:
        """The WGSL text of a TIR expression: :meth:`operator` for the operators, else the
        ``e_<node type name>`` method (the handler of each node type found once, in
        :data:`_EXPR_HANDLERS`)."""
        handler = _EXPR_HANDLERS.get(type(e))
        if handler is None:
            kind = type(e).__name__
            if kind in _BINARY_OPS or kind in _SHIFT_OPS:
                handler = lambda self, e: self.operator(kind, e.a, e.b)  # noqa: E731
            elif kind in _UNARY_OPS:
                handler = lambda self, e: self.operator(kind, e.a)  # noqa: E731
            else:
                handler = getattr(_Emitter, "e_" + kind, None)
                if handler is None:
                    raise self.fail(f"expression {kind} ({e}) has no WGSL translation")
            _EXPR_HANDLERS[type(e)] = handler
        return handler(self, e)

    def e_IntImm(self, e) -> str:
        dt = self.dtype(e)
        wt = _scalar_type(dt, self.where)
        v = int(e.value)
        if wt == "bool":
            return "true" if v else "false"
        if wt == "u32":
            return f"{v}u"
        if not -(2**31) <= v < 2**31:
            raise self.fail(f"integer constant {v} does not fit WGSL's i32")
        return f"i32({v})" if v < 0 else str(v)

    def e_FloatImm(self, e) -> str:
        dtype = str(self.dtype(e))
        if dtype not in ("float32", "float16"):
            raise self.fail(f"{dtype} constant {e.value}: float32 and float16 only")
        lit = _float_literal(float(e.value), dtype)
        if "rvk_" in lit and dtype == "float16":
            raise self.fail(f"float16 constant {e.value} is not finite")
        if "rvk_" in lit:
            self.helpers.add("rvk_inf" if "inf" in lit else "rvk_nan")
        return lit

    def e_Let(self, e) -> str:
        value = self.expr(e.value)
        name = self.bind(e.var)
        self.pending.append(f"let {name}: {wgsl_type(self.dtype(e.var), self.where)} = {value};")
        return self.expr(e.body)

    def e_Var(self, e) -> str:
        return self.var(e)

    def _binary(self, e, op: str) -> str:
        return f"({self.expr(e.a)} {op} {self.expr(e.b)})"

    def operator(self, kind: str, a, b=None) -> str:
        """An operator of :data:`_BINARY_OPS` / :data:`_SHIFT_OPS` / :data:`_UNARY_OPS` on TIR operands."""
        dtype = self.dtype(a)
        flag = dtype == "bool"  # (WGSL's ~ and ^ take integers only: torch's ~mask is a bitwise_not of bools)
        if kind in _UNARY_OPS:
            return f"({'!' if flag else _UNARY_OPS[kind]}{self.expr(a)})"
        if kind in _SHIFT_OPS:
            wide = int(dtype.bits) == 64 and isinstance(b, tirx.IntImm) and int(b.value) >= 32
            if wide and kind == "RShift":
                # int64 arithmetic runs in i32 (module docstring): ``x >> 63`` (TVM's sign test in
                # floordiv/floormod) is ``x >> 31``; WGSL rejects shifts past the bit width
                return f"({self.expr(a)} >> 31u)"
            if wide:
                return f"({self.expr(a)} * 0)"  # every bit shifted out of the 32 kept
            return f"({self.expr(a)} {_SHIFT_OPS[kind]} {self._shift_amount(b)})"
        if kind in _FLOAT_OPS and int(dtype.type_code) == 2:
            return self.helper_call(_FLOAT_OPS[kind], [a, b], a) if kind == "Mod" else f"(!({self.expr(a)} == {self.expr(b)}))"
        if flag and kind in ("Mul", "Min"):  # (WGSL has no arithmetic on bool: a product of flags is their and)
            return f"({self.expr(a)} && {self.expr(b)})"
        if flag and kind in ("Add", "Max"):  # (a sum of flags as a flag: their or)
            return f"({self.expr(a)} || {self.expr(b)})"
        return f"({self.expr(a)} {'!=' if flag and kind == 'BitwiseXor' else _BINARY_OPS[kind]} {self.expr(b)})"

    def _is_float(self, e) -> bool:
        return int(self.dtype(e).type_code) == 2

    def e_FloorDiv(self, e):
        if self._is_float(e):
            return f"floor({self._binary(e, '/')})"
        self.helpers.add("rvk_floordiv")
        return self._call_helper("rvk_floordiv", e)

    def e_FloorMod(self, e):
        if self._is_float(e):
            a, b = self.expr(e.a), self.expr(e.b)
            return f"({a} - floor({a} / {b}) * {b})"
        self.helpers.add("rvk_floormod")
        return self._call_helper("rvk_floormod", e)

    def _call_helper(self, name: str, e) -> str:
        if int(self.dtype(e).lanes) != 1:
            raise self.fail(f"{name} on vectors")
        return f"{name}({self.expr(e.a)}, {self.expr(e.b)})"

    def e_Min(self, e):
        if self._is_float(e):  # TVM's a < b ? a : b, NaN included (helpers.py)
            return self.helper_call("rvk_min", [e.a, e.b], e)
        return f"min({self.expr(e.a)}, {self.expr(e.b)})"

    def e_Max(self, e):
        if self._is_float(e):
            return self.helper_call("rvk_max", [e.a, e.b], e)
        return f"max({self.expr(e.a)}, {self.expr(e.b)})"

    def e_And(self, e):
        return self._binary(e, "&&" if int(self.dtype(e).lanes) == 1 else "&")

    def e_Or(self, e):
        return self._binary(e, "||" if int(self.dtype(e).lanes) == 1 else "|")

    def _shift_amount(self, b) -> str:
        lanes = int(self.dtype(b).lanes)
        return f"u32({self.expr(b)})" if lanes == 1 else f"vec{lanes}<u32>({self.expr(b)})"

    def e_Select(self, e):
        return f"select({self.expr(e.false_value)}, {self.expr(e.true_value)}, {self.expr(e.condition)})"

    def e_Cast(self, e):
        dtype = self.dtype(e)
        t = wgsl_type(dtype, self.where)
        code, bits = int(dtype.type_code), int(dtype.bits)
        if code in (0, 1) and bits in (8, 16) and str(self.dtype(e.value)) != str(dtype):
            # a cast to an 8/16-bit integer wraps to its width (C's conversion, what TVM means):
            # computed in 32 bits, then sign-extended from (int) or masked to (uint) the low bits
            lanes = int(dtype.lanes)
            amount = f"{32 - bits}u" if lanes == 1 else f"vec{lanes}<u32>({32 - bits}u)"
            wide = f"{t}({self.expr(e.value)})"
            if code == 0:
                return f"(({wide} << {amount}) >> {amount})"
            mask = f"{(1 << bits) - 1}u" if lanes == 1 else f"vec{lanes}<u32>({(1 << bits) - 1}u)"
            return f"({wide} & {mask})"
        return f"{t}({self.expr(e.value)})"

    def e_Broadcast(self, e):  # vecN<T>(scalar) splats, as Broadcast means
        return f"{wgsl_type(self.dtype(e), self.where)}({self.expr(e.value)})"

    def e_Ramp(self, e):
        lanes = int(e.lanes)
        t = wgsl_type(self.dtype(e), self.where)
        steps = ", ".join(str(i) for i in range(lanes))
        return f"({t}({self.expr(e.base)}) + {t}({steps}) * {t}({self.expr(e.stride)}))"

    def e_Shuffle(self, e):
        vectors = list(e.vectors)
        indices = [int(i.value) for i in e.indices]
        comps = []
        for v in vectors:
            lanes = int(self.dtype(v).lanes)
            text = self.expr(v)
            comps.extend([text] if lanes == 1 else [f"{text}[{k}]" for k in range(lanes)])
        picked = [comps[i] for i in indices]
        if len(picked) == 1:
            return picked[0]
        return f"{wgsl_type(self.dtype(e), self.where)}({', '.join(picked)})"

    def _lane_indices(self, index) -> Optional[List[str]]:
        """Per-lane index strings of a vector index, or None for a scalar index."""
        lanes = int(self.dtype(index).lanes)
        if lanes == 1:
            return None
        if type(index).__name__ == "Ramp":
            base, stride = self.expr(index.base), index.stride
            if isinstance(stride, tirx.IntImm) and isinstance(index.base, tirx.IntImm):
                b, s = int(index.base.value), int(stride.value)
                return [str(b + i * s) for i in range(lanes)]
            if isinstance(stride, tirx.IntImm):
                s = int(stride.value)
                return [base if i == 0 else f"({base} + {i * s})" for i in range(lanes)]
            st = self.expr(stride)
            return [f"({base} + {i} * {st})" for i in range(lanes)]
        text = self.expr(index)
        return [f"{text}[{k}]" for k in range(lanes)]

    def facts(self, buffer) -> _BufferFacts:
        """The :class:`_BufferFacts` of a buffer a load or store accesses, kept per buffer until
        the next allocation or declaration (which may change a buffer's storage)."""
        facts = self.buffer_facts.get(buffer)
        if facts is not None:
            return facts
        if buffer not in self.roots:
            raise self.fail(f"buffer {buffer.name} is used before it is declared or allocated")
        data = self.roots[buffer]
        if data in self.textures:
            raise self.fail(f"texture {buffer.name} is accessed as a buffer (texture accesses must be flattened first)")
        if data not in self.buffers:
            raise self.fail(f"buffer {buffer.name} has no storage (its allocation was not seen)")
        byte_kind = self.byte_dtype[data] if data in self.byte_buffers else None
        facts = _BufferFacts(self.buffers[data], data, byte_kind, int(_dtype(str(buffer.dtype)).lanes))
        self.buffer_facts[buffer] = facts
        return facts

    def storage(self, buffer) -> str:
        """The identifier of the storage a buffer views."""
        return self.facts(buffer).name

    def e_BufferLoad(self, e):
        buffer = e.buffer if hasattr(e, "buffer") else e.source  # TVM 0.27: TensorLoad.source
        if not isinstance(buffer, tirx.Buffer):
            raise self.fail(f"load from {buffer} (not a buffer)")
        indices = e.indices
        if len(indices) != 1:
            raise self.fail(f"buffer {buffer.name} is not flattened ({len(indices)} indices)")
        index = indices[0]
        facts = self.facts(buffer)
        name, kind = facts.name, facts.byte_kind
        if kind is not None:
            dtype = self.dtype(e)
            lanes = int(dtype.lanes)
            if lanes != 1 and kind == "bool":
                raise self.fail(f"vector load from the bool buffer {buffer.name} (flags are read one at a time)")
            packed = self._four_bytes(name, index, kind) if lanes == 4 else None
            if packed is not None:
                return packed
            lane_indices = [self.expr(index)] if lanes == 1 else self._lane_indices(index)
            if lane_indices is None:
                raise self.fail(f"vector load from the {kind} buffer {buffer.name} at a vector index it cannot split")
            values = [self._byte(name, i, kind) for i in lane_indices]
            return values[0] if lanes == 1 else f"{wgsl_type(dtype, self.where)}({', '.join(values)})"
        if facts.lanes != 1:  # e.g. a float32x4 workspace: array<vec4<f32>>
            if int(self.dtype(index).lanes) != 1:
                raise self.fail(f"vector index into the vector-typed buffer {buffer.name} ({buffer.dtype})")
            return f"{name}[{self.expr(index)}]"
        if facts.root in self.wide_buffers:  # the low word of each element
            lanes = [self.expr(index)] if int(self.dtype(index).lanes) == 1 else self._lane_indices(index)
            if lanes is None:
                raise self.fail(f"vector load from the 64-bit buffer {buffer.name} at a vector index it cannot split")
            values = [f"{name}[{i}].x" for i in lanes]
            return values[0] if len(values) == 1 else f"{wgsl_type(self.dtype(e), self.where)}({', '.join(values)})"
        lanes = self._lane_indices(index)
        if lanes is None:
            return f"{name}[{self.expr(index)}]"
        t = wgsl_type(self.dtype(e), self.where)
        return f"{t}({', '.join(f'{name}[{i}]' for i in lanes)})"

    e_TensorLoad = e_BufferLoad  # TVM 0.27's name for a BufferLoad

    def _four_bytes(self, name: str, index, kind: str) -> Optional[str]:
        """Four consecutive int8/uint8 values starting at a multiple of 4 (an OIHW4o weight texel):
        one word's four bytes at constant shifts (the lanes' loads are one address; each lane's
        shift would otherwise be computed from its index), or None for any other vector index."""
        stride = index.stride if isinstance(index, tirx.Ramp) else None
        if kind not in ("int8", "uint8") or not isinstance(stride, tirx.IntImm) or int(stride) != 1:
            return None
        modular = tvm.sym.Analyzer().modular_set(index.base)
        if int(modular.coeff) % 4 or int(modular.base) % 4:
            return None
        word = f"{_WORD_MARK}{name}(({self.expr(index.base)}) >> 2u)"
        if kind == "int8":
            return f"vec4<i32>({', '.join(f'(bitcast<i32>(({word}) << {24 - 8 * k}u) >> 24u)' for k in range(4))})"
        return f"vec4<u32>({', '.join(f'((({word}) >> {8 * k}u) & 0xffu)' for k in range(4))})"

    @staticmethod
    def _byte(name: str, index: str, kind: str) -> str:
        """Byte ``index`` of the byte buffer ``name`` as its WGSL value: a bool, the u32 of a
        uint8, or the sign-extended i32 of an int8 (its byte shifted to the top, then down)."""
        # the word, plain or atomic: known once the body shows whether the kernel stores here
        word = f"{_WORD_MARK}{name}(({index}) >> 2u)"
        shift = f"(u32(({index}) & 3) * 8u)"
        if kind == "int8":
            return f"(bitcast<i32>(({word}) << (24u - {shift})) >> 24u)"
        value = f"((({word}) >> {shift}) & 0xffu)"
        return f"({value} != 0u)" if kind == "bool" else value

    def e_Call(self, e):
        full = getattr(e.op, "name", None)
        if full is None:
            raise self.fail(f"call of {e.op} (not an intrinsic)")
        prefix, _, op = full.partition(".")
        if prefix not in ("tirx", "prim"):
            raise self.fail(f"call of {full} has no WGSL translation")
        if op == "texture2d_load":
            return self.texture_load(e)
        if op in ("call_pure_extern", "call_extern"):
            return self.math(str(e.args[0].value), list(e.args[1:]), e)
        if op == "if_then_else":
            c, t, f = e.args
            return f"select({self.expr(f)}, {self.expr(t)}, {self.expr(c)})"
        if op == "likely":
            return self.expr(e.args[0])
        if op in _CALL_OPS:
            return self.operator(_CALL_OPS[op], *e.args)
        if op == "reinterpret":
            return f"bitcast<{wgsl_type(self.dtype(e), self.where)}>({self.expr(e.args[0])})"
        if op in MATH_FUNCTIONS:
            return self.math(op, list(e.args), e)
        raise self.fail(f"call of {full} has no WGSL translation")

    def math(self, name: str, args, e) -> str:
        base = name[:-1] if name.endswith("f") and name[:-1] in MATH_FUNCTIONS else name
        if base not in MATH_FUNCTIONS:
            raise self.fail(f"math function {name} has no WGSL translation")
        for a in list(args) + [e]:
            if int(self.dtype(a).type_code) == 2 and str(self.dtype(a)).split("x")[0] not in ("float32", "float16"):
                raise self.fail(f"{name} on {self.dtype(a)}: float32 and float16 only")
        wgsl, helper = MATH_FUNCTIONS[base]
        if helper:
            return self.helper_call(wgsl, args, e)
        return f"{wgsl}({', '.join(self.expr(a) for a in args)})"

    def scalar_helper(self, helper: str, operands: List[Tuple[str, bool]], half_result: bool) -> str:
        """A call of a float32 helper on scalar ``(text, is_float16)`` operands: float16 operands
        are widened and, when ``half_result``, the result is narrowed back."""
        self.helpers.add(helper)
        call = f"{helper}({', '.join(f'f32({t})' if half else t for t, half in operands)})"
        return f"f16({call})" if half_result else call

    def helper_call(self, helper: str, args, e) -> str:
        """A call of a float32 helper function on TIR operands (:meth:`scalar_helper`); on
        vectors, lane by lane, each vector operand bound to a ``let`` first (evaluated once)."""
        half = lambda x: int(self.dtype(x).bits) == 16 and self._is_float(x)  # noqa: E731
        texts = [self.expr(a) for a in args]
        lanes = int(self.dtype(e).lanes)
        if lanes == 1:
            return self.scalar_helper(helper, [(t, half(a)) for a, t in zip(args, texts)], half(e))
        operands = []
        for a, text in zip(args, texts):
            name = self.fresh(f"{helper[4:]}_arg")
            self.pending.append(f"let {name}: {wgsl_type(self.dtype(a), self.where)} = {text};")
            operands.append((name, int(self.dtype(a).lanes) != 1, half(a)))
        calls = [self.scalar_helper(helper, [(f"{n}[{k}]" if vec else n, h) for n, vec, h in operands], half(e)) for k in range(lanes)]
        return f"{wgsl_type(self.dtype(e), self.where)}({', '.join(calls)})"

    def texture_args(self, args, what: str):
        """The texture, coordinates and layer of a ``texture2d_load`` / ``texture2d_store`` call's
        ``args`` (``(data, x, y, layer, texel bits, lane or value)``), and the texture's dtype."""
        data = self.root(args[0])
        if data not in self.textures:
            raise self.fail(f"{what} of {data}, which is not a texture parameter")
        self.textures[data].add("store" if what == "texture store" else "load")
        dtype = self.texture_dtype[data]
        bits = 16 * 4 if dtype == "float16" else 32 * 4
        texel_bits = args[4]
        if not (isinstance(texel_bits, tirx.IntImm) and int(texel_bits.value) == bits):
            raise self.fail(f"{what} of {texel_bits}-bit texels ({dtype} RGBA texels are {bits} bits)")
        x, y, layer = (self.expr(a) for a in args[1:4])
        return self.names[data], f"vec2<i32>({x}, {y})", layer, dtype

    def texture_load(self, e) -> str:
        args = e.args
        name, coords, layer, dtype = self.texture_args(args, "texture load")
        texel = f"textureLoad({name}, {coords}, {layer}, 0)"  # vec4<f32> for rgba32float and rgba16float
        elem = "f16" if dtype == "float16" else "f32"
        if elem == "f16":
            texel = f"vec4<f16>({texel})"
        lane = args[5]
        if _is_ramp_lanes(lane, 0, 4):
            return texel
        lanes = int(self.dtype(lane).lanes)
        if lanes == 1:
            return f"{texel}[{self.expr(lane)}]"
        picks = self._lane_indices(lane)
        return f"vec{lanes}<{elem}>({', '.join(f'{texel}[{p}]' for p in picks)})"

    def e_StringImm(self, e):
        raise self.fail(f"string {e.value!r} used as a value")

    # --------------------------------------------------------- statements
    def stmt(self, s, depth: int) -> None:
        """Emit a TIR statement at indentation ``depth`` by the ``s_<node type name>`` method (found
        once per node type, in :data:`_STMT_HANDLERS`)."""
        handler = _STMT_HANDLERS.get(type(s))
        if handler is None:
            kind = type(s).__name__
            handler = getattr(_Emitter, "s_" + kind, None)
            if handler is None:
                raise self.fail(f"statement {kind} has no WGSL translation")
            _STMT_HANDLERS[type(s)] = handler
        handler(self, s, depth)

    def s_SeqStmt(self, s, depth):
        for x in s.seq:
            self.stmt(x, depth)

    def s_Bind(self, s, depth):
        if not hasattr(s.var.ty, "dtype"):
            raise self.fail(f"binding of a non-value variable {s.var.name}")
        value = self.expr(s.value)
        name = self.bind(s.var)
        self.emit(depth, f"let {name}: {wgsl_type(self.dtype(s.var), self.where)} = {value};")

    def root(self, data):
        """The parameter Var or allocated Buffer a data pointer expression refers to."""
        if isinstance(data, tvm.ir.expr.Call) and getattr(data.op, "name", "") == "tirx.buffer_data":
            buf = data.args[0]
            if buf in self.roots:
                return self.roots[buf]
            raise self.fail(f"buffer {buf.name} is used before it is declared")
        if data in self.buffers or data in self.textures:
            return data
        raise self.fail(f"pointer {data} is neither a parameter nor an allocation")

    def s_DeclBuffer(self, s, depth):
        self.roots[s.buffer] = self.root(s.data)
        self.buffer_facts.clear()

    def s_AllocBuffer(self, s, depth):
        buf = s.buffer
        scope = str(buf.scope()) if callable(getattr(buf, "scope", None)) else str(buf.data.ty.storage_scope)
        shape = list(buf.shape)
        if len(shape) != 1 or not isinstance(shape[0], tirx.IntImm):
            raise self.fail(f"allocation {buf.name} of shape {shape}: constant 1-D allocations only")
        n = int(shape[0].value)
        elem = wgsl_type(str(buf.dtype), f"kernel {self.kernel}: allocation {buf.name}")
        name = self.fresh(str(buf.name))
        self.buffers[buf] = name
        self.roots[buf] = buf
        self.buffer_facts.clear()
        if scope == "local":
            self.emit(depth, f"var {name}: array<{elem}, {n}>;")
        elif scope == "shared":
            self.module_vars.append(f"var<workgroup> {name}: array<{elem}, {n}>;")
            self.workgroup_bytes += n * max(int(_dtype(str(buf.dtype)).bits) * int(_dtype(str(buf.dtype)).lanes) // 8, 4)
        else:
            raise self.fail(f"allocation {buf.name} in scope {scope!r} (local and shared only)")

    def s_AttrStmt(self, s, depth):
        if s.attr_key == "thread_extent":
            iv = s.node
            tag = str(iv.thread_tag)
            scope, _, axis = tag.partition(".")
            if scope not in ("blockIdx", "threadIdx") or axis not in _AXES:
                raise self.fail(f"thread binding {tag}")
            if scope == "blockIdx":
                # the workgroup count comes from the dispatch: a symbolic extent (a grid over a
                # run-time size) is the runtime's to compute, per run, from the step's "global"
                extent = int(s.value.value) if isinstance(s.value, tirx.IntImm) else s.value
                before = self.grid.setdefault(tag, extent)
                if isinstance(before, int) != isinstance(extent, int):
                    same = False  # (never ==: an int and a PrimExpr compare as a new EQ node)
                elif isinstance(extent, int):
                    same = before == extent
                else:
                    same = tvm_ffi.structural_equal(before, extent)
                if not same:
                    raise self.fail(f"{tag} launched with extents {before} and {extent}")
            else:
                if not isinstance(s.value, tirx.IntImm):
                    raise self.fail(f"{tag} has a symbolic extent {s.value} (workgroup sizes are constants)")
                extent = int(s.value.value)
                if self.thread_extent.setdefault(tag, extent) != extent:
                    raise self.fail(f"{tag} launched with extents {self.thread_extent[tag]} and {extent}")
            builtin = "rvk_wid" if scope == "blockIdx" else "rvk_lid"
            name = self.bind(iv.var)
            self.emit(depth, f"let {name}: i32 = i32({builtin}.{axis});")
        self.stmt(s.body, depth)

    def s_For(self, s, depth):
        kind = int(s.kind)
        if kind not in (int(tirx.stmt.ForKind.SERIAL), int(tirx.stmt.ForKind.UNROLLED)):
            raise self.fail(f"loop {s.loop_var.name} of kind {s.kind} (serial and unrolled loops only)")
        if self._unrolls(s):
            # small constant trip count: one block per iteration with the loop variable a constant,
            # so local arrays indexed by it are indexed statically (registers, not memory)
            for i in range(int(s.min.value), int(s.min.value) + int(s.extent.value)):
                self.emit(depth, "{")
                self.emit(depth + 1, f"let {self.bind(s.loop_var)}: i32 = {i};")
                self.stmt(s.body, depth + 1)
                self.emit(depth, "}")
            return
        lo, ext = self.expr(s.min), self.expr(s.extent)
        name = self.bind(s.loop_var)
        bound = ext if isinstance(s.min, tirx.IntImm) and int(s.min.value) == 0 else f"{lo} + {ext}"
        self.emit(depth, f"for (var {name}: i32 = {lo}; {name} < {bound}; {name}++) {{")
        self.stmt(s.body, depth + 1)
        self.emit(depth, "}")

    UNROLL_TRIPS = 4

    def _unrolls(self, s) -> bool:
        """Innermost loops of at most UNROLL_TRIPS constant iterations (unrolling nests as well
        multiplies the shader size, and the drivers' compile time with it: a 6 MB UNet)."""
        return (
            isinstance(s.min, tirx.IntImm)
            and isinstance(s.extent, tirx.IntImm)
            and int(s.extent.value) <= self.UNROLL_TRIPS
            and not _has_loop(s.body)
        )

    def s_While(self, s, depth):
        self.emit(depth, "loop {")
        self.emit(depth + 1, f"if (!({self.expr(s.condition)})) {{ break; }}")
        self.stmt(s.body, depth + 1)
        self.emit(depth, "}")

    def s_IfThenElse(self, s, depth):
        self.emit(depth, f"if ({self.expr(s.condition)}) {{")
        self.stmt(s.then_case, depth + 1)
        if s.else_case is not None:
            self.emit(depth, "} else {")
            self.stmt(s.else_case, depth + 1)
        self.emit(depth, "}")

    def s_Break(self, s, depth):
        self.emit(depth, "break;")

    def s_Continue(self, s, depth):
        self.emit(depth, "continue;")

    def s_BufferStore(self, s, depth):
        buffer, indices, value_expr = s.buffer, s.indices, s.value
        if len(indices) != 1:
            raise self.fail(f"buffer {buffer.name} is not flattened ({len(indices)} indices)")
        index = indices[0]
        facts = self.facts(buffer)
        name, kind = facts.name, facts.byte_kind
        self.stored.add(facts.root)
        value_lanes = int(self.dtype(value_expr).lanes)
        if kind is not None:
            lanes = value_lanes
            if lanes != 1 and kind == "bool":
                raise self.fail(f"vector store into the bool buffer {buffer.name} (flags are written one at a time)")
            lane_indices = [self.expr(index)] if lanes == 1 else self._lane_indices(index)
            if lane_indices is None:
                raise self.fail(f"vector store into the {kind} buffer {buffer.name} at a vector index it cannot split")
            # each thread clears and sets only its own byte of the word, atomically: WGSL has no
            # byte stores (one atomic pair per byte: slow, which is why quantized activations are
            # rewritten to float before import, :mod:`relax_vk.frontends.onnx_quant`)
            value = self.fresh(f"{name}_v")
            self.emit(depth, "{")
            self.emit(depth + 1, f"let {value} = {self.expr(value_expr)};")
            for k, idx in enumerate(lane_indices):
                at, shift = self.fresh(f"{name}_i"), self.fresh(f"{name}_s")
                lane = value if lanes == 1 else f"{value}[{k}]"
                bits = f"select(0u, 1u, {lane})" if kind == "bool" else f"(u32({lane}) & 0xffu)"
                self.emit(depth + 1, f"let {at} = {idx};")
                self.emit(depth + 1, f"let {shift} = u32({at} & 3) * 8u;")
                self.emit(depth + 1, f"atomicAnd(&{name}[{at} >> 2u], ~(0xffu << {shift}));")
                self.emit(depth + 1, f"atomicOr(&{name}[{at} >> 2u], {bits} << {shift});")
            self.emit(depth, "}")
            return
        if facts.lanes != 1 and int(self.dtype(index).lanes) != 1:
            raise self.fail(f"vector index into the vector-typed buffer {buffer.name} ({buffer.dtype})")
        if facts.root in self.wide_buffers:  # the value and its extension to 64 bits
            lane_indices = [self.expr(index)] if value_lanes == 1 else self._lane_indices(index)
            if lane_indices is None:
                raise self.fail(f"vector store into the 64-bit buffer {buffer.name} at a vector index it cannot split")
            signed = str(buffer.dtype).startswith("int")
            value = self.fresh(f"{name}_v")
            self.emit(depth, "{")
            self.emit(depth + 1, f"let {value} = {self.expr(value_expr)};")
            for k, at in enumerate(lane_indices):
                lane = value if value_lanes == 1 else f"{value}[{k}]"
                high = f"({lane} >> 31u)" if signed else "0u"
                self.emit(depth + 1, f"{name}[{at}] = vec2<{'i32' if signed else 'u32'}>({lane}, {high});")
            self.emit(depth, "}")
            return
        if value_lanes > 4:  # no WGSL vector that wide: every lane read, then stored
            temps = [self.fresh(f"{name}_l{k}") for k in range(value_lanes)]
            self.emit(depth, "{")
            for k, tmp in enumerate(temps):
                self.emit(depth + 1, f"let {tmp} = {self.lane(value_expr, k)};")
            for k, tmp in enumerate(temps):
                self.emit(depth + 1, f"{name}[{self.lane(index, k)}] = {tmp};")
            self.emit(depth, "}")
            return
        lanes = self._lane_indices(index)
        value = self.expr(value_expr)
        if lanes is None:
            if value_lanes != facts.lanes:
                raise self.fail(f"{self.dtype(value_expr)} store into {buffer.name} ({buffer.dtype}) at a scalar index")
            self.emit(depth, f"{name}[{self.expr(index)}] = {value};")
            return
        tmp = self.fresh(f"{name}_v")
        self.emit(depth, "{")
        self.emit(depth + 1, f"let {tmp} = {value};")
        for k, at in enumerate(lanes):
            self.emit(depth + 1, f"{name}[{at}] = {tmp}[{k}];")
        self.emit(depth, "}")

    def lane(self, e, k: int) -> str:
        """Lane ``k`` of a (possibly wide) vector expression, as a scalar WGSL expression: how
        vectors wider than WGSL's 4 lanes (e.g. float16x8 loads) are written out."""
        if int(self.dtype(e).lanes) == 1:
            return self.expr(e)
        kind = type(e).__name__
        if kind == "Ramp":
            return f"({self.expr(e.base)} + {k} * {self.expr(e.stride)})"
        if kind == "Broadcast":
            return self.expr(e.value)
        if kind in ("BufferLoad", "TensorLoad"):
            buffer = e.buffer if hasattr(e, "buffer") else e.source
            if int(_dtype(str(buffer.dtype)).lanes) != 1:
                raise self.fail(f"wide load from the vector-typed buffer {buffer.name}")
            return f"{self.storage(buffer)}[{self.lane(e.indices[0], k)}]"
        if kind in (*_FLOAT_OPS, "Min", "Max") and self._is_float(e.a):  # as operator(), e_Min and e_Max
            a, b = self.lane(e.a, k), self.lane(e.b, k)
            if kind == "NE":
                return f"(!({a} == {b}))"
            half = int(self.dtype(e.a).bits) == 16
            return self.scalar_helper(_FLOAT_OPS.get(kind) or f"rvk_{kind.lower()}", [(a, half), (b, half)], half)
        if kind in _BINARY_OPS:
            return f"({self.lane(e.a, k)} {_BINARY_OPS[kind]} {self.lane(e.b, k)})"
        if kind in ("Min", "Max"):
            return f"{kind.lower()}({self.lane(e.a, k)}, {self.lane(e.b, k)})"
        if kind == "Select":
            return f"select({self.lane(e.false_value, k)}, {self.lane(e.true_value, k)}, {self.lane(e.condition, k)})"
        if kind == "Cast":
            return f"{_scalar_type(self.dtype(e), self.where)}({self.lane(e.value, k)})"
        if kind == "Shuffle":
            flat = []
            for v in e.vectors:
                flat.extend([(v, j) for j in range(int(self.dtype(v).lanes))])
            v, j = flat[int(e.indices[k].value)]
            return self.lane(v, j)
        raise self.fail(f"{self.dtype(e)} expression {kind} wider than WGSL's 4-lane vectors")

    def s_Evaluate(self, s, depth):
        v = s.value
        if isinstance(v, tirx.IntImm):
            return
        if not isinstance(v, tvm.ir.expr.Call):
            raise self.fail(f"evaluated expression {v}")
        op = getattr(v.op, "name", "").replace("prim.", "tirx.", 1)
        if op == "tirx.texture2d_store":
            args = v.args
            name, coords, layer, dtype = self.texture_args(args, "texture store")
            value = args[5]
            texel = f"{dtype}x4"
            if str(self.dtype(value)) != texel:
                raise self.fail(f"texture store of {self.dtype(value)} into a {texel} texture (whole texels only)")
            text = self.expr(value)
            self.emit(depth, f"textureStore({name}, {coords}, {layer}, {text if texel == 'float32x4' else f'vec4<f32>({text})'});")
        elif op == "tirx.tvm_storage_sync":
            scope = str(v.args[0].value)
            if scope not in ("shared", "warp"):
                raise self.fail(f"storage sync of scope {scope!r} (a grid-wide barrier has no WGSL equivalent)")
            self.emit(depth, "workgroupBarrier();")
        else:
            raise self.fail(f"statement call {op} has no WGSL translation")

    # ------------------------------------------------------------- module
    def run(self) -> Shader:
        self.params()
        if self.scalars:
            self.args_block = "rvk_args"  # (names starting rvk_ are the emitter's own: fresh)
        for param in self.func.params:
            if param in self.scalars:
                word = self.scalars[param]
                self.emit(1, f"let {self.names[param]}: i32 = {self.args_block}[{word // 4}].{'xyzw'[word % 4]};")
        self.stmt(self.func.body, 1)
        atomic = {self.names[p] for p in self.byte_buffers & self.stored}
        self.lines = [_resolve_words(line, atomic) for line in self.lines]
        params = self.declare_params()
        workgroup = tuple(self.thread_extent.get(f"threadIdx.{a}", 1) for a in _AXES)
        header = [
            f"// relax_vk: kernel {self.kernel}",
            *params,
            *self.module_vars,
            *[HELPERS[h] for h in helper_closure(self.helpers)],
            "",
            f"@compute @workgroup_size({workgroup[0]}, {workgroup[1]}, {workgroup[2]})",
            "fn main(@builtin(workgroup_id) rvk_wid: vec3<u32>, @builtin(local_invocation_id) rvk_lid: vec3<u32>) {",
        ]
        text = "\n".join(header[1:] + self.lines + ["}", ""])  # (the first line, the kernel's name, is no f16)
        if ("f16" in text or _HALF_SUFFIX.search(text)) and _USES_F16.search(text):  # (a quick test first)
            text = "enable f16;\n" + text
        source = header[0] + "\n" + text
        trips = loop_iterations(self.func.body, self._unrolls)
        bound = symbolic_loop_iterations(self.func, self._unrolls) if trips is None else None
        return Shader(self.kernel, source, workgroup, tuple(self.bindings), self.workgroup_bytes, trips, bound, tuple(self.func.params) if bound is not None else ())


_WORD_MARK = "__rvk_word__"
# the f16 type or a half literal (``1.5h``) in WGSL source: the shader then says ``enable f16;``
_USES_F16 = re.compile(r"\bf16\b|(?<![\w.])\d+(\.\d*)?(e[-+]?\d+)?h\b")
_HALF_SUFFIX = re.compile(r"[\d.]h\b")  # in every half literal _USES_F16 finds


def _resolve_words(line: str, atomic: set) -> str:
    """Replace each ``__rvk_word__NAME(INDEX)`` of a bool buffer's word read by ``NAME[INDEX]``,
    or ``atomicLoad(&NAME[INDEX])`` when the kernel also writes NAME (an atomic array)."""
    while _WORD_MARK in line:
        start = line.index(_WORD_MARK)
        open_ = line.index("(", start)
        depth, end = 0, open_
        for end in range(open_, len(line)):
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            if depth == 0:
                break
        name, index = line[start + len(_WORD_MARK) : open_], line[open_ + 1 : end]
        word = f"atomicLoad(&{name}[{index}])" if name in atomic else f"{name}[{index}]"
        line = line[:start] + word + line[end + 1 :]
    return line


def emit_kernel(func: tirx.PrimFunc, name: str, half_storage: bool = False) -> Shader:
    """The WGSL :class:`Shader` of one device kernel (see the module docstring). ``half_storage``:
    the textures it writes hold half texels (``rgba16float``) whatever the kernel computes in."""
    emitter = _Emitter(func, name)
    emitter.half_storage = half_storage
    return emitter.run()


def emit_module(device_mod: tvm.IRModule, half_storage: bool = False, float_texels: Collection[str] = ()) -> Dict[str, Shader]:
    """``{kernel name: Shader}`` for every device kernel of a finalized device module
    (``half_storage``: the textures they write hold half texels, but for the kernels named in
    ``float_texels``)."""
    shaders = {}
    for gvar, func in device_mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else gvar.name_hint
            shaders[name] = emit_kernel(func, name, half_storage and name not in float_texels)
    return shaders
